package main

import (
	"fmt"
	"io"

	"github.com/sessiond/sessiond/internal/daemon"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/version"
)

// versionCmd prints the version, or with --handoff the live-upgrade
// handoff formats this binary can adopt, then the handoff features it
// honours, one a line, and its version (so an upgrade's check runs it
// once).
func versionCmd(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		fmt.Fprintln(stdout, "sessiond", version.String())
	case len(args) == 1 && args[0] == "--handoff":
		for _, f := range daemon.HandoffFormats {
			fmt.Fprintln(stdout, f)
		}
		for _, f := range daemon.HandoffFeatures {
			fmt.Fprintln(stdout, f)
		}
		fmt.Fprintln(stdout, daemon.HandoffVersionLine(version.String()))
	default:
		fmt.Fprintln(stderr, "usage: sessiond version [--handoff]")
		return exitcode.Usage
	}
	return exitcode.OK
}
