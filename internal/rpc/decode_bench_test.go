package rpc

import "testing"

// BenchmarkDecode: the read loop's decoding of one message of the common
// shape (inMessage), per method: no params, a hold's, a send's.
func BenchmarkDecode(b *testing.B) {
	for _, m := range []struct{ name, msg string }{
		{"status", `{"jsonrpc":"2.0","id":3,"method":"daemon.status","params":{}}`},
		{"hold", `{"jsonrpc":"2.0","id":3,"method":"agentSession.hold","params":{"sessionId":"s_aaaaaaaa","holderId":"h","ttlMs":30000}}`},
		{"send", `{"jsonrpc":"2.0","id":4,"method":"agentSession.send","params":{"sessionId":"s_aaaaaaaa","text":"fix the failing test in internal/rpc, then run it again","clientMessageId":"m-1"}}`},
	} {
		b.Run(m.name, func(b *testing.B) {
			msg := []byte(m.msg)
			b.ReportAllocs()
			for b.Loop() {
				var in inMessage
				if err := in.UnmarshalJSON(msg); err != nil || in.req == nil {
					b.Fatal(err)
				}
			}
		})
	}
}
