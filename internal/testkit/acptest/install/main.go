// Command install installs the pinned ACP SDK (its JSON Schema) and
// codex-acp the tests run into the test cache (`make test` runs it first).
package main

import (
	"os"

	"github.com/sessiond/sessiond/internal/testkit/acptest"
)

func main() { os.Exit(acptest.Install(os.Stdout, os.Stderr)) }
