// Package version is the version this binary reports: set at build time
// with -ldflags "-X github.com/sessiond/sessiond/internal/version.buildVersion=…",
// else the module version go build recorded, else "dev".
package version

import "runtime/debug"

// buildVersion is set with -ldflags "-X github.com/sessiond/sessiond/internal/version.buildVersion=…".
var buildVersion = ""

// String is this binary's version.
func String() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
