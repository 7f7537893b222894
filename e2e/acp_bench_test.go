package e2e

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// BenchmarkACPDeltaLatency: the time from the daemon's commit of a delta
// (its event's at) to its agent_message_chunk at an editor over `sessiond
// acp`, against the same delta's arrival at a direct socket client, in the
// same run: one single-delta echo turn per iteration. Reported as the
// medians and p99s in µs and the ratio of the medians (issue 27's target:
// ≤ 1.2).
func BenchmarkACPDeltaLatency(b *testing.B) {
	d := daemontest.Start(b, daemontest.Options{})
	e := startEditor(b, "--socket", d.Socket)
	e.initialize()
	id := e.newSession(b.TempDir())
	type arrival struct {
		ev event.Event
		at time.Time
	}
	arrivals := make(chan arrival, 1024)
	dc, err := rpc.Dial(context.Background(), d.Socket, rpc.ClientOptions{OnNotify: func(method string, p json.RawMessage) {
		at := time.Now()
		var n api.EventNotice
		if method == rpc.NotifyEvent && json.Unmarshal(p, &n) == nil {
			arrivals <- arrival{n.Event, at}
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer dc.Close()
	var info api.SessionInfo
	if err := dc.Call(context.Background(), "agentSession.get", api.SessionParams{SessionID: id}, &info); err != nil {
		b.Fatal(err)
	}
	if err := dc.Call(context.Background(), "agentSession.attach", api.AttachParams{SessionID: id, AfterSeq: info.LastSeq}, nil); err != nil {
		b.Fatal(err)
	}
	var direct, editor []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.call("session/prompt", promptParams(id, "x"), nil)
		var chunk acpUpdate
		for _, u := range e.updates() {
			if u.Update.Kind == "agent_message_chunk" {
				chunk = u
			}
		}
		for {
			a := <-arrivals
			ev := a.ev
			if ev.Type == event.MessageDelta {
				direct = append(direct, a.at.Sub(ev.At))
				editor = append(editor, chunk.at.Sub(ev.At))
			}
			if ev.Type == event.TurnCompleted {
				break
			}
		}
	}
	b.StopTimer()
	q := func(v []time.Duration, p float64) float64 {
		s := append([]time.Duration(nil), v...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[int(p*float64(len(s)-1))].Microseconds())
	}
	if len(direct) == 0 || len(editor) != len(direct) {
		b.Fatalf("deltas: %d direct, %d editor", len(direct), len(editor))
	}
	b.ReportMetric(q(direct, 0.5), "direct-p50-µs")
	b.ReportMetric(q(direct, 0.99), "direct-p99-µs")
	b.ReportMetric(q(editor, 0.5), "editor-p50-µs")
	b.ReportMetric(q(editor, 0.99), "editor-p99-µs")
	b.ReportMetric(q(editor, 0.5)/q(direct, 0.5), "ratio-p50")
}
