// Package rpc is sessiond's JSON-RPC 2.0 server on its Unix socket, and the
// Go client that `sessiond ctl` and the tests use.
//
// The server owns its connections and its message types outright
// (message.go; sourcegraph/jsonrpc2 serves the client, through its Conn):
//
//   - Listen binds the socket (a private directory, dial before unlinking,
//     mode 0600); every accepted peer's uid is checked (SO_PEERCRED).
//   - framing.go names the connection's framing from its first byte
//     (newline-delimited JSON or Content-Length headers); stream.go reads
//     messages under max_message_bytes and writes replies and
//     notifications, each write under a progress deadline (write_timeout:
//     no byte written for that long closes the connection).
//   - readloop.go is the reading model: one goroutine reads a connection
//     for its whole life, a request's params kept as sent (simple.go
//     decodes the usual shape by hand). conn.go's handle gates each request
//     (initialize first, then capabilities) and answers refusals and fast
//     methods inline, so in order; queue.go sends every method that can
//     wait (it takes a session lock or starts a child) to a FIFO queue
//     per (connection, sessionId) whose worker runs while it is not empty:
//     calls naming one session run in the order sent, different sessions
//     side by side, and the reader never waits for a call. Queues are
//     bounded per connection (calls and params bytes; limit_exceeded past
//     them).
//   - outbound.go bounds the bytes held, across every connection, for
//     output not yet written; past max_outbound_bytes the connection
//     holding the most is closed.
//   - methods.go is the method table (name → capability, queued or not,
//     handler); params are decoded once into the method's params type
//     (queued.go: when a queued call is read, so they key its queue) and
//     checked; handlers.go calls the
//     api.Backend (the host); reply.go encodes replies once, splicing
//     event pages in; errors.go maps api kinds to codes and data.reason.
//
// A handler panic is answered -32603 and the connection goes on. When a
// connection closes, its queued calls are dropped unrun, its running
// handlers finish, then the Backend's ConnClosed runs once, then its
// subscription pumps end.
package rpc
