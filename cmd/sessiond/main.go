// Command sessiond supervises coding-agent provider processes for one user
// (see README.md and PROTOCOL.md).
//
//	sessiond serve   [--socket PATH] [--state-dir DIR] [--config FILE] [--log-level L] [--log-format F]
//	sessiond ctl     [--socket PATH | --remote HOST] [--json] SUBCOMMAND …
//	sessiond acp     [--provider NAME] [--account A] [--socket PATH] [--state-dir DIR] [--config FILE]
//	sessiond proxy   [--socket PATH] [--state-dir DIR] [--config FILE]
//	sessiond provider echo [flags]
//	sessiond install-service [--binary PATH] [--dry-run] [--force]
//	sessiond version [--handoff]
//	sessiond openrpc
//
// Exit codes (internal/exitcode): 0 ok, 1 error (from the daemon, or the
// daemon failed), 2 usage, 3 no daemon running (ctl; proxy: none reachable).
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sessiond/sessiond/internal/acpagent"
	"github.com/sessiond/sessiond/internal/ctl"
	"github.com/sessiond/sessiond/internal/daemon"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/proxy"
	"github.com/sessiond/sessiond/internal/service"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitcode.Usage
	}
	switch args[0] {
	case "serve":
		return daemon.Serve(args[1:], stderr)
	case "ctl":
		return ctl.Run(args[1:], stdout, stderr)
	case "acp":
		return acpagent.Run(args[1:], stdin, stdout, stderr)
	case "proxy":
		return proxy.Run(args[1:], stdin, os.Stdout, stderr)
	case "install-service":
		return service.Install(args[1:], stdout, stderr)
	case "provider":
		return providerCmd(args[1:], stdin, stdout, stderr)
	case "openrpc":
		return openrpcCmd(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return versionCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return exitcode.OK
	default:
		fmt.Fprintf(stderr, "sessiond: unknown command %q\n", args[0])
		usage(stderr)
		return exitcode.Usage
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  sessiond serve   [--socket PATH] [--state-dir DIR] [--config FILE]
                   [--log-level debug|info|warn|error] [--log-format auto|text|json]
  sessiond ctl     [--socket PATH | --remote HOST] [--json] SUBCOMMAND   (sessiond ctl help)
  sessiond acp     [--provider NAME] [--account A] [--socket PATH] [--state-dir DIR] [--config FILE]
                   (an ACP agent on stdio for editors, bridging to the daemon)
  sessiond proxy   [--socket PATH] [--state-dir DIR] [--config FILE]
                   (the daemon's socket on stdio, starting it if none runs:
                   ssh HOST sessiond proxy)
  sessiond provider echo [--ignore-sigterm] [--ignore-eof] [--exit-at-start] [--slow-start MS]
  sessiond install-service [--binary PATH] [--dry-run] [--force]
                   (copies this binary to PATH, default ~/.local/bin/sessiond,
                   and writes the systemd user units / launchd agent naming it)
  sessiond version [--handoff]                     (--handoff: the live-upgrade formats it reads)
  sessiond openrpc                                 (prints the rpc.discover document)

exit codes: 0 ok, 1 error, 2 usage, 3 no daemon running
`)
}
