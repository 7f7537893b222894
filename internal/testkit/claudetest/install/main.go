// Command install installs the pinned Claude Code CLI the tests run into
// the test cache (`make test` runs it first, so a fresh clone gets it once,
// before the tests start, with npm's output on the terminal).
package main

import (
	"os"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

func main() { os.Exit(claudetest.Install(os.Stdout, os.Stderr)) }
