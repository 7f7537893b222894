// Package ctl is the ops CLI, `sessiond ctl`: one file per subcommand
// (registered in ctl.go), the rendering of turns and tables for a
// terminal, and --json output. It talks to the daemon through the rpc
// package's Go client.
package ctl
