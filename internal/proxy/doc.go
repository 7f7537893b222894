// Package proxy is `sessiond proxy`: the daemon's socket on stdio, so a
// client on another machine reaches it through `ssh HOST sessiond proxy`.
//
// Run connects to the local daemon, starting `sessiond serve` when none
// accepts (package autostart: one starter at a time, under
// <state-dir>/proxy-start.lock, shared with `sessiond acp`; detached in its
// own session, the same flags and environment; the store's flock lets one
// daemon run, a start that lost it is no error as long as the winner
// accepts), then copies bytes both ways,
// unchanged (copy.go). The proxy reads nothing it copies: framing, bounds and
// garbage are the daemon's to answer. Half-closes travel both ways: the
// client's EOF on stdin becomes a write shutdown of the socket, and stdout is
// closed only after the socket's last byte was written to it. The peer check
// is the transport's (SSH's); the daemon's own SO_PEERCRED check sees the
// proxy's uid.
//
// Exit codes: 0 when the client closed (stdin EOF, or stdout gone), 1 when
// the daemon closed the connection first or a copy failed, 2 usage, 3 when no
// daemon could be reached or started.
package proxy
