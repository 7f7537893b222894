// Package systemdunits holds sessiond's systemd user units, embedded so
// that `sessiond install-service` writes exactly the text of these files
// (only the binary's path in ExecStart differs).
package systemdunits

import "embed"

// Files holds sessiond.socket and sessiond.service.
//
//go:embed sessiond.socket sessiond.service
var Files embed.FS

// Names are the unit files, in the order they are installed.
var Names = []string{"sessiond.socket", "sessiond.service"}

// TemplateBinary is the sessiond path ExecStart names in the files.
const TemplateBinary = "/usr/local/bin/sessiond"
