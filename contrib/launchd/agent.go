// Package launchdagent holds sessiond's launchd user agent, embedded so
// that `sessiond install-service` on macOS writes exactly this file (only
// the binary's path and the log file differ).
package launchdagent

import _ "embed"

// Plist is dev.sessiond.plist.
//
//go:embed dev.sessiond.plist
var Plist string

// Name is the agent's file name in ~/Library/LaunchAgents.
const Name = "dev.sessiond.plist"

// TemplateBinary and TemplateLog are the paths the file names, replaced
// when it is installed.
const (
	TemplateBinary = "/usr/local/bin/sessiond"
	TemplateLog    = "/usr/local/var/log/sessiond.log"
)
