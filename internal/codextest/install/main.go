// Command install installs the pinned codex CLI the tests run into the
// test cache (`make test` runs it first, so a fresh clone gets it once,
// before the tests start, with npm's output on the terminal).
package main

import (
	"fmt"
	"os"

	"github.com/sessiond/sessiond/internal/codextest"
)

func main() {
	bin, err := codextest.Ensure()
	if err != nil {
		fmt.Fprintf(os.Stderr, "install codex %s: %v\ninstall it by hand with: %s\n", codextest.Version, err, codextest.InstallCommand())
		os.Exit(1)
	}
	fmt.Println("codex", codextest.Version, "at", bin)
}
