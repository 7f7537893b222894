package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// buildVersion is set with -ldflags "-X main.buildVersion=…".
var buildVersion = ""

func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// versionCmd prints the version, or with --handoff the live-upgrade
// handoff formats this binary can adopt, one a line.
func versionCmd(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		fmt.Fprintln(stdout, "sessiond", version())
	case len(args) == 1 && args[0] == "--handoff":
		for _, f := range handoffFormats {
			fmt.Fprintln(stdout, f)
		}
	default:
		fmt.Fprintln(stderr, "usage: sessiond version [--handoff]")
		return exitUsage
	}
	return exitOK
}
