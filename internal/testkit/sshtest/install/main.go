// Command install installs Debian's openssh-server when sshd is missing
// (the ssh tests of `sessiond proxy` run a real one; see package sshtest).
package main

import (
	"fmt"
	"os"

	"github.com/sessiond/sessiond/internal/testkit/sshtest"
)

func main() {
	if err := sshtest.Install(); err != nil {
		fmt.Fprintln(os.Stderr, "sshtest install:", err)
		os.Exit(1)
	}
}
