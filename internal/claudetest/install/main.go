// Command install installs the pinned Claude Code CLI the tests run into
// the test cache (`make test` runs it first, so a fresh clone gets it once,
// before the tests start, with npm's output on the terminal).
package main

import (
	"fmt"
	"os"

	"github.com/sessiond/sessiond/internal/claudetest"
)

func main() {
	bin, err := claudetest.Ensure()
	if err != nil {
		fmt.Fprintf(os.Stderr, "install claude %s: %v\ninstall it by hand with: %s\n", claudetest.Version, err, claudetest.InstallCommand())
		os.Exit(1)
	}
	fmt.Println("claude", claudetest.Version, "at", bin)
}
