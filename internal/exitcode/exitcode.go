// Package exitcode holds the exit codes scripts can rely on, shared by
// every sessiond subcommand: 0 ok, 1 error (from the daemon, or the daemon
// failed), 2 usage, 3 no daemon running (ctl).
package exitcode

const (
	OK       = 0
	Error    = 1
	Usage    = 2
	NoDaemon = 3
)
