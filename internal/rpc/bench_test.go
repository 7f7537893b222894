package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// BenchmarkCall: one request/response round trip over the socket
// (agentSession.get against the fake backend), per framing.
func BenchmarkCall(b *testing.B) {
	for _, f := range framings {
		b.Run(f.String(), func(b *testing.B) {
			ts := startServerTB(b, newFake(), nil)
			c, err := Dial(context.Background(), ts.path, ClientOptions{Framing: f})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			p := api.SessionParams{SessionID: "s_aaaaaaaa"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var s api.SessionInfo
				if err := c.Call(ctx, "agentSession.get", p, &s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// countSub hands out n small events, then blocks.
type countSub struct {
	n, seq uint64
	data   json.RawMessage
}

func (s *countSub) ID() string { return "bench" }
func (s *countSub) Abandon()   {}
func (s *countSub) Next(ctx context.Context) (event.Event, error) {
	if s.seq < s.n {
		s.seq++
		return event.Event{SessionID: "s_aaaaaaaa", Seq: s.seq, Type: event.MessageDelta, Data: s.data, At: time.Unix(0, 0)}, nil
	}
	<-ctx.Done()
	return event.Event{}, api.ErrSubscriptionClosed
}

// BenchmarkEventNotify: events pumped to a subscriber as notifications
// (a 64-byte delta each), per framing.
func BenchmarkEventNotify(b *testing.B) {
	for _, f := range framings {
		b.Run(f.String(), func(b *testing.B) {
			fake := newFake()
			sub := &countSub{n: uint64(b.N), data: json.RawMessage(`{"text":"` + string(make64()) + `"}`)}
			fake.attachHook = func(string, api.AttachParams, bool) (api.AttachResult, api.Subscription, error) {
				return api.AttachResult{SubscriptionID: "bench"}, sub, nil
			}
			ts := startServerTB(b, fake, nil)
			done := make(chan struct{})
			got := 0
			c, err := Dial(context.Background(), ts.path, ClientOptions{Framing: f, OnNotify: func(string, json.RawMessage) {
				got++
				if got == b.N {
					close(done)
				}
			}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ResetTimer()
			if err := c.Call(context.Background(), "agentSession.attach", api.AttachParams{SessionID: "s_aaaaaaaa"}, nil); err != nil {
				b.Fatal(err)
			}
			<-done
		})
	}
}

func make64() []byte {
	b := make([]byte, 64)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// BenchmarkEventNotifyServerOnly: as BenchmarkEventNotify, but the reader
// only counts lines, so the figure is the server's cost per event.
func BenchmarkEventNotifyServerOnly(b *testing.B) {
	fake := newFake()
	sub := &countSub{n: uint64(b.N), data: json.RawMessage(`{"text":"` + string(make64()) + `"}`)}
	fake.attachHook = func(string, api.AttachParams, bool) (api.AttachResult, api.Subscription, error) {
		return api.AttachResult{SubscriptionID: "bench"}, sub, nil
	}
	ts := startServerTB(b, fake, nil)
	nc, err := net.Dial("unix", ts.path)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReaderSize(nc, 1<<20)
	io.WriteString(nc, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.attach.v1"]}}`+"\n")
	br.ReadSlice('\n')
	b.ResetTimer()
	io.WriteString(nc, `{"jsonrpc":"2.0","id":2,"method":"agentSession.attach","params":{"sessionId":"s_aaaaaaaa"}}`+"\n")
	for i := 0; i < b.N+1; i++ { // the reply, then b.N events
		if _, err := br.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallServerOnly: one round trip per iteration from a raw
// newline client (no jsonrpc2 on the client side), so a CPU profile shows
// the server's own request path; per method.
func BenchmarkCallServerOnly(b *testing.B) {
	for _, m := range []struct{ name, req string }{
		{"status", `{"jsonrpc":"2.0","id":3,"method":"daemon.status"}`},
		{"hold", `{"jsonrpc":"2.0","id":3,"method":"agentSession.hold","params":{"sessionId":"s_aaaaaaaa","holderId":"h"}}`},
	} {
		b.Run(m.name, func(b *testing.B) {
			ts := startServerTB(b, newFake(), nil)
			nc, err := net.Dial("unix", ts.path)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			br := bufio.NewReaderSize(nc, 1<<16)
			io.WriteString(nc, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.structured.hold.v1"]}}`+"\n")
			br.ReadSlice('\n')
			req := []byte(m.req + "\n")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				nc.Write(req)
				if line, err := br.ReadSlice('\n'); err != nil || !bytes.Contains(line, []byte(`"result"`)) {
					b.Fatalf("%s: %v", line, err)
				}
			}
		})
	}
}
