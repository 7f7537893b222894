// Command install installs the pinned ACP agents the tests run into the
// test cache (the Makefile runs it before the tests, so a fresh clone gets
// them once, with npm's output on the terminal): every agent, or those
// named as arguments (copilot, qwen, opencode, claude-agent-acp, gemini).
package main

import (
	"fmt"
	"os"

	"github.com/sessiond/sessiond/internal/testkit/acpagents"
)

func main() {
	agents := acpagents.All
	if len(os.Args) > 1 {
		agents = nil
		for _, name := range os.Args[1:] {
			a := acpagents.Named(name)
			if a == nil {
				fmt.Fprintf(os.Stderr, "install: no agent %q (one of copilot, qwen, opencode, claude-agent-acp, gemini)\n", name)
				os.Exit(2)
			}
			agents = append(agents, a)
		}
	}
	code := 0
	for _, a := range agents {
		if c := a.Install(os.Stdout, os.Stderr); c != 0 {
			code = c
		}
	}
	os.Exit(code)
}
