package rpc

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// bigPage is a read page of about n bytes on the wire.
func bigPage(n int) api.ReadResult {
	data, _ := json.Marshal(map[string]string{"text": strings.Repeat("z", 8<<10)})
	var evs []event.Event
	for i := 0; i < n/(8<<10); i++ {
		evs = append(evs, event.Event{SessionID: "s_aaaaaaaa", Seq: uint64(i + 1), Type: event.MessageDelta, Data: data})
	}
	return api.ReadResult{Events: evs, LastSeq: uint64(len(evs))}
}

// TestWriteTimeoutMeasuresProgress: write_timeout is a stall (no byte
// written for that long), not the time one message takes: a client that
// reads a 4 MiB reply slowly but steadily (about 16 KiB per 10 ms, so the
// reply takes several write_timeouts) gets all of it and is served after;
// one that reads part of it and stops is closed, logged write_timeout.
func TestWriteTimeoutMeasuresProgress(t *testing.T) {
	fake := newFake()
	fake.readHook = func(api.ReadParams) api.ReadResult { return bigPage(4 << 20) }
	ts := startServer(t, fake, func(o *ServerOptions) { o.WriteTimeout = 500 * time.Millisecond })

	t.Run("steady", func(t *testing.T) {
		r := ts.raw(t, FramingLines)
		r.initialize()
		r.send(`{"jsonrpc":"2.0","id":2,"method":"agentSession.read","params":{"sessionId":"s_aaaaaaaa"}}`)
		var got []byte
		buf := make([]byte, 16<<10)
		start := time.Now()
		for len(got) == 0 || got[len(got)-1] != '\n' {
			r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := r.br.Read(buf)
			if err != nil {
				t.Fatalf("after %d bytes in %v: %v", len(got), time.Since(start), err)
			}
			got = append(got, buf[:n]...)
			time.Sleep(10 * time.Millisecond) // a slow reader's pace, not synchronisation
		}
		var m map[string]any
		if err := json.Unmarshal(got, &m); err != nil || m["result"] == nil {
			t.Fatalf("reply of %d bytes: %v", len(got), err)
		}
		r.send(`{"jsonrpc":"2.0","id":3,"method":"daemon.status"}`)
		if m := r.recv(); m["id"] != 3.0 {
			t.Fatalf("after the slow reply: %v", m)
		}
	})

	t.Run("stopped", func(t *testing.T) {
		before := ts.logs.count("peer stopped reading", "reason=write_timeout")
		r := ts.raw(t, FramingLines)
		r.initialize()
		r.send(`{"jsonrpc":"2.0","id":2,"method":"agentSession.read","params":{"sessionId":"s_aaaaaaaa"}}`)
		if _, err := io.ReadFull(r.br, make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
		// and never read again
		ts.logs.waitFor(t, before+1, "peer stopped reading", "reason=write_timeout")
	})
}
