package rpc

import "testing"

// TestClientResponseIgnored: a response from the client (the server sends
// no requests) is ignored, as jsonrpc2 ignored it, and the connection goes
// on; in both framings.
func TestClientResponseIgnored(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	for _, f := range framings {
		t.Run(f.String(), func(t *testing.T) {
			r := ts.raw(t, f)
			r.initialize()
			r.send(`{"jsonrpc":"2.0","id":5,"result":{"x":1}}`)
			r.send(`{"jsonrpc":"2.0","id":6,"result":null}`)
			r.send(`{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"m"}}`)
			r.send(`{"jsonrpc":"2.0","id":8,"method":"daemon.status"}`)
			if m := r.recv(); m["result"] == nil || m["id"] != 8.0 {
				t.Fatalf("after responses: %v", m)
			}
		})
	}
}
