package main

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// tricky strings: quotes, backslash runs before quotes, brackets and keys
// inside strings, escapes, non-ASCII.
var tricky = []string{"", `"`, `\`, `\\`, `\"`, `"seq":99`, `]}`, `[{`, `"events":[1,2]`, "é\u2028<&>", "\x01\t\n", `hasMore":true`}

func rapidText(t *rapid.T, label string) string {
	parts := rapid.SliceOfN(rapid.OneOf(rapid.SampledFrom(tricky), rapid.String()), 0, 4).Draw(t, label)
	return strings.Join(parts, "")
}

// TestScanPageMatchesDecode: the walker reads the same count, last seq,
// hasMore, subscriptionId and id as encoding/json for attach and read
// answers whose strings and data hold every kind of JSON the daemon can
// send (as json.Marshal writes them, and with blanks between tokens).
func TestScanPageMatchesDecode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 6).Draw(t, "n")
		evs := make([]event.Event, n)
		seq := rapid.Uint64Range(0, 1<<62).Draw(t, "seq")
		for i := range evs {
			data, _ := json.Marshal(map[string]any{"text": rapidText(t, "text"), "seq": 7,
				"nested": []any{map[string]any{"events": []int{1}}, rapidText(t, "inner"), nil, true, 1.5e-3}})
			evs[i] = event.Event{SessionID: "s", Seq: seq + uint64(i), At: time.Unix(0, 0).UTC(),
				Type: rapidText(t, "type"), Data: data}
		}
		var res any = api.ReadResult{Events: evs, HasMore: rapid.Bool().Draw(t, "more"), LastSeq: 5}
		sub := ""
		if rapid.Bool().Draw(t, "attach") {
			sub = rapidText(t, "sub")
			res = api.AttachResult{SubscriptionID: sub, Session: api.SessionInfo{SessionID: rapidText(t, "sid")}, Events: evs,
				HasMore: res.(api.ReadResult).HasMore}
		}
		id := rapid.IntRange(0, 1<<30).Draw(t, "id")
		line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": res})
		if err != nil {
			t.Fatal(err)
		}
		if rapid.Bool().Draw(t, "indent") {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetIndent(" ", "\t")
			enc.Encode(json.RawMessage(line))
			line = []byte(b.String())
		}
		p, err := scanPage(line)
		if err != nil {
			t.Fatalf("%v in %s", err, line)
		}
		var want struct {
			Result struct {
				Events []struct {
					Seq uint64 `json:"seq"`
				} `json:"events"`
				HasMore        bool   `json:"hasMore"`
				SubscriptionID string `json:"subscriptionId"`
			} `json:"result"`
		}
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatal(err)
		}
		last := uint64(0)
		if k := len(want.Result.Events); k > 0 {
			last = want.Result.Events[k-1].Seq
		}
		if p.events != len(want.Result.Events) || p.last != last || p.more != want.Result.HasMore ||
			string(p.id) != strconv.Itoa(id) || p.err != nil {
			t.Fatalf("walked %d events, last %d, more %v, id %s, err %s; decoded %d, %d, %v, %d in %s",
				p.events, p.last, p.more, p.id, p.err, len(want.Result.Events), last, want.Result.HasMore, id, line)
		}
		if raw, _ := json.Marshal(sub); string(p.sub) != string(raw[1:len(raw)-1]) {
			t.Fatalf("subscriptionId %q, want the raw %s", p.sub, raw)
		}
	})
}

func TestScanPageErrorAndMalformed(t *testing.T) {
	p, err := scanPage([]byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"x \"}"}}` + "\n"))
	if err != nil || string(p.id) != "3" || string(p.err) != `{"code":-32602,"message":"x \"}"}` {
		t.Fatalf("error answer: %+v, %v", p, err)
	}
	for _, bad := range []string{``, `{`, `{"id":1`, `{"id":"1}`, `{"result":{"events":[{"seq":1},]}}`,
		`{"result":{"events":[{"seq":"1"}]}}`, `{"id":1}x`, `{"id":tru}`, `{"result":{"events":[{"seq":99999999999999999999}]}}`} {
		if _, err := scanPage([]byte(bad)); !errors.Is(err, errWalk) {
			t.Errorf("scanPage(%q) = %v, want a walk error", bad, err)
		}
	}
}

// TestScanPageAllocs: walking a page allocates nothing, whatever its size.
func TestScanPageAllocs(t *testing.T) {
	evs := make([]event.Event, 100)
	for i := range evs {
		evs[i] = event.Event{SessionID: "s", Seq: uint64(i + 1), Type: "message.delta", Data: json.RawMessage(`{"text":"a\"b"}`)}
	}
	line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": api.ReadResult{Events: evs}})
	if a := testing.AllocsPerRun(20, func() {
		if p, err := scanPage(line); err != nil || p.events != 100 || p.last != 100 {
			t.Fatalf("%+v %v", p, err)
		}
	}); a != 0 {
		t.Errorf("%v allocations per page, want 0", a)
	}
}

// BenchmarkScanPage: the walking client's cost per event on a page like
// the replay's (4096 events of a 64-byte delta); ns/op is per page.
func BenchmarkScanPage(b *testing.B) {
	evs := make([]event.Event, 4096)
	at := time.Date(2026, 11, 30, 17, 16, 11, 123456789, time.UTC)
	for i := range evs {
		evs[i] = event.Event{SessionID: "bench_00000000", Seq: uint64(i + 1), At: at, Type: event.MessageDelta,
			TurnID: "t_bench", Data: json.RawMessage(`{"text":"` + strings.Repeat("x", 64) + `"}`)}
	}
	line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": api.ReadResult{Events: evs, HasMore: true}})
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if p, err := scanPage(line); err != nil || p.events != 4096 {
			b.Fatal(p, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4096, "ns/event")
}
