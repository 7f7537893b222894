// Command install installs Debian's dbus package when dbus-daemon is
// missing (the attention tests run a real one; see package dbustest).
package main

import (
	"fmt"
	"os"

	"github.com/sessiond/sessiond/internal/testkit/dbustest"
)

func main() {
	if err := dbustest.Install(); err != nil {
		fmt.Fprintln(os.Stderr, "dbustest install:", err)
		os.Exit(1)
	}
}
