package journal

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/internal/event"
	"pgregory.net/rapid"
)

// The row decoder's fast path is only a speed-up: a row that leaves it
// still decodes through encoding/json. These tests count the fallbacks
// (slowDecodes) so that a fast path which stops taking the rows the daemon
// writes fails a test, and check that both paths read a row alike.

// daemonRows are drafts of every event type the daemon writes, with
// plain strings and with strings escaped inside data.
func daemonRows() []event.Draft {
	esc := "line \"one\"\n\ttab \\ back <b>&amp; é ☃ \u2028"
	return []event.Draft{
		event.New(event.SessionCreated, "", map[string]any{"provider": "echo", "cwd": "/tmp/w"}),
		event.New(event.LeaseAcquired, "", map[string]any{"clientId": "c_1", "ttlMs": 30000}),
		event.New(event.ProviderStarted, "", map[string]any{"pid": 4242, "threadId": "th_9"}),
		event.New(event.ProviderThreadReplace, "", map[string]any{"old": "th_9", "new": "th_10"}),
		event.New(event.TurnStarted, "turn-1", event.TurnStartedData{TurnID: "turn-1", Text: "hi", ClientMessageID: "cm-1"}),
		event.New(event.TurnStarted, "turn-2", event.TurnStartedData{TurnID: "turn-2", Text: esc}),
		event.New(event.MessageDelta, "turn-2", event.DeltaData{Text: "plain"}),
		event.New(event.MessageDelta, "turn-2", event.DeltaData{Text: esc, ItemID: "it_1"}),
		event.New(event.MessageCompleted, "turn-2", event.DeltaData{Text: "plain" + esc}),
		event.New(event.ItemStarted, "turn-2", event.ItemData{ItemID: "it_2", Kind: event.KindReasoning, Payload: map[string]any{}}),
		event.New(event.ItemDelta, "turn-2", event.ItemDeltaData{ItemID: "it_2", Stream: event.StreamOutput, Text: esc}),
		event.New(event.ItemCompleted, "turn-2", event.ItemData{ItemID: "it_2", Kind: event.KindCommandExecution, Status: event.ItemCompletedStatus, Payload: map[string]any{"cmd": []string{"ls", "-l"}, "exit": 0}}),
		event.New(event.TurnPlan, "turn-2", map[string]any{"steps": []string{"a", esc}}),
		event.New(event.TurnDiff, "turn-2", map[string]any{"diff": "--- a\n+++ b\n"}),
		event.New(event.TurnUsage, "turn-2", map[string]any{"input": 9, "output": 99}),
		event.New(event.ApprovalRequested, "turn-2", event.ApprovalRequestedData{RequestID: "r_9", Kind: "exec", Detail: json.RawMessage(`{"cmd":["rm","-rf","\"x\""]}`), Options: []string{"allow", "deny"}}),
		event.New(event.ApprovalResolved, "turn-2", event.ApprovalResolvedData{RequestID: "r_9", Decision: "allow", By: "c_1"}),
		event.New(event.ProviderNotice, "turn-2", event.NoticeData{Level: "warning", Message: esc, Code: "rate_limit"}),
		event.New(event.TurnCompleted, "turn-2", event.TurnCompletedData{Status: event.StatusCompleted}),
		event.New(event.JournalLoss, "", map[string]any{"count": 3, "cause": esc}),
		event.New(event.ProviderExited, "", map[string]any{"code": 0}),
		event.New(event.SessionEnded, "", nil),
		event.New(event.LeaseReleased, "", nil),
	}
}

// TestDaemonRowsStayOnFastPath: every row the daemon writes, read back
// from the journal, is decoded without the general decoder, and reads as
// it was written.
func TestDaemonRowsStayOnFastPath(t *testing.T) {
	j, _ := open(t, Options{})
	ds := daemonRows()
	const id = "sess-fast_9"
	written := mustAppend(t, j, id, ds...)
	before := slowDecodes.Load()
	evs, _, _, err := j.Read(id, 0, len(ds))
	if err != nil || len(evs) != len(ds) {
		t.Fatalf("read: %d events, %v", len(evs), err)
	}
	if n := slowDecodes.Load() - before; n != 0 {
		t.Fatalf("%d of %d rows left the fast path", n, len(ds))
	}
	for i := range evs {
		if !sameEvent(evs[i], written[i]) || string(evs[i].Raw) != string(event.AppendJSON(nil, &written[i])) {
			t.Fatalf("row %d: read %s, wrote %s", i, evs[i].Raw, event.AppendJSON(nil, &written[i]))
		}
	}
}

// TestFastPathRows: rows in the stored shape, validated (as rows found in
// the file are) and not, one reader for all (its caches of the last
// session, time, type and turn in play), stay on the fast path and agree
// with encoding/json.
func TestFastPathRows(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC)
	var evs []event.Event
	seqs := []uint64{1, 9, 10, 19, 90, 99, 1234567890, 1<<63 + 9, 1<<64 - 1}
	for i, d := range daemonRows() {
		for _, id := range []string{"s", "sess-1"} {
			evs = append(evs, event.Event{SessionID: id, Seq: seqs[i%len(seqs)], At: at.Add(time.Duration(i/3) * time.Second),
				Type: d.Type, TurnID: d.TurnID, Data: d.Data})
		}
	}
	for _, s := range seqs {
		evs = append(evs, event.Event{SessionID: "sess-1", Seq: s, At: at, Type: event.MessageDelta, TurnID: "t", Data: json.RawMessage(`0`)})
	}
	for _, validate := range []bool{false, true} {
		rr := rowReader{validate: validate}
		before := slowDecodes.Load()
		for _, e := range evs {
			row := event.AppendJSON(nil, &e)
			got, err := rr.event(e.SessionID, e.Seq, row)
			if err != nil || !sameEvent(got, e) || string(got.Raw) != string(row) {
				t.Fatalf("validate %v: %s read as %+v (%v)", validate, row, got, err)
			}
			if n := slowDecodes.Load() - before; n != 0 {
				t.Fatalf("validate %v: %s left the fast path", validate, row)
			}
		}
	}
}

// TestEscapedRowsLeaveFastPath: a row whose session, type or turn needs
// escapes is read by encoding/json, and reads as written.
func TestEscapedRowsLeaveFastPath(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	rows := []event.Event{
		{SessionID: `s"1`, Seq: 1, At: at, Type: event.MessageDelta, TurnID: "t", Data: json.RawMessage(`{}`)},
		{SessionID: "s", Seq: 2, At: at, Type: "x.<y>", TurnID: "t"},
		{SessionID: "s", Seq: 3, At: at, Type: event.MessageDelta, TurnID: "t\\n\n", Data: json.RawMessage(`{}`)},
		{SessionID: "s", Seq: 4, At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Type: event.MessageDelta},
	}
	rr := rowReader{validate: true}
	for _, e := range rows {
		row := event.AppendJSON(nil, &e)
		before := slowDecodes.Load()
		got, err := rr.event(e.SessionID, e.Seq, row)
		if err != nil || got.SessionID != e.SessionID || got.Seq != e.Seq || got.Type != e.Type || got.TurnID != e.TurnID {
			t.Fatalf("%s read as %+v (%v)", row, got, err)
		}
		if slowDecodes.Load() == before {
			t.Fatalf("%s stayed on the fast path", row)
		}
	}
}

// TestFastPathRefusesBadRows: rows that are not events in the stored
// shape are not taken by the fast path; encoding/json refuses them too.
func TestFastPathRefusesBadRows(t *testing.T) {
	const tail = `,"at":"2026-01-01T00:00:00Z","type":"message.delta"}`
	rows := []string{
		`{"sessionId":"s","seq":,"at":"2026-01-01T00:00:00Z","type":"x"}`,
		`{"sessionId":"s","seq":01` + tail,
		`{"sessionId":"s","seq":12`,
		`{"sessionId":"s","seq":18446744073709551616` + tail,
		`{"sessionId":"s","seq":184467440737095516150` + tail,
		`{"sessionId":"s","seq":1` + `,"at":"","type":"message.delta"}`,
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":""}`,
		`{"sessionId":"s","seq":1` + tail[:len(tail)-1],
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":"x","data":}`,
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":"x","data":{"a":1]`,
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":"x","data":{"a":}}`,
		`{"sessionId":_","seq":1` + tail,
		`{"sessionId":"s_,"seq":1` + tail,
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":"x","turnId":"t}`,
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":"x","turnId":t"}`,
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":x"}`,
		`{"sessionId":"s","seq":1,"at":2026-01-01T00:00:00Z","type":"x"}`,
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":"x"}}`,
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":"x"`,
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":"x","data":1`,
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":"x","data":1}x`,
		`{"sessionId":"s","seq":1,"at":"not a time","type":"x"}`,
		`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","ty`,
		`{"sessionId":"s","seq":1,"a`,
		`{"sessionId":"s","se`,
		`{"sessionId":"s`,
		`{"sessionId":"`,
		`{"sessionId":`,
		`{"sess`,
	}
	for _, row := range rows {
		if _, err := decodeEvent([]byte(row)); err == nil {
			t.Errorf("%s: decoded", row)
		}
		for _, id := range []string{"", "s", "_"} {
			rr := rowReader{}
			if ev, ok := rr.decodeFast([]byte(row), id, true); ok {
				t.Errorf("%s (id %q): fast path took it: %+v", row, id, ev)
			}
		}
	}
	if _, err := decodeEvent([]byte(`{"sessionId":"s","seq":1,"at":"2026-01-01T00:00:00Z","type":""}`)); !errors.Is(err, errBadRow) {
		t.Errorf("empty type: %v, want %v", err, errBadRow)
	}
}

// TestFastSlowAgree (property): any row in the stored shape decodes on
// the fast path when its strings need no escape, and the fast path, when
// it takes a row (also one with a byte changed), reads it as
// encoding/json does.
func TestFastSlowAgree(t *testing.T) {
	plainStr := rapid.StringMatching(`[a-zA-Z0-9_.:-]{0,12}`)
	anyStr := rapid.OneOf(plainStr, rapid.String(), rapid.SampledFrom([]string{`a"b`, `a\b`, "a\nb", "é", "<", ""}))
	dataGen := rapid.SampledFrom([]string{"", `{}`, `0`, `1`, `true`, `null`, `"s"`, `[]`, `{"text":"a\"b\\c"}`, `{"a":[1,{"b":null}],"c":"\u00e9"}`})
	rapid.Check(t, func(t *rapid.T) {
		rr := rowReader{validate: rapid.Bool().Draw(t, "validate")}
		n := rapid.IntRange(1, 6).Draw(t, "rows")
		for i := range n {
			e := event.Event{
				SessionID: anyStr.Draw(t, "session"),
				Seq:       rapid.OneOf(rapid.Uint64Range(0, 1000), rapid.Uint64()).Draw(t, "seq"),
				At:        time.Unix(rapid.Int64Range(0, 1<<35).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "ns")).UTC(),
				Type:      rapid.OneOf(rapid.SampledFrom(append(knownTypes, event.ItemDelta, event.ProviderNotice)), anyStr).Draw(t, "type"),
				TurnID:    anyStr.Draw(t, "turn"),
				Data:      json.RawMessage(dataGen.Draw(t, "data")),
			}
			if len(e.Data) == 0 {
				e.Data = nil
			}
			row := event.AppendJSON(nil, &e)
			if edit := rapid.IntRange(-1, len(row)-1).Draw(t, "edit"); edit >= 0 && i == n-1 {
				row[edit] = rapid.SampledFrom([]byte(`"\{}[],:0 9ax-`)).Draw(t, "byte")
			}
			slow, slowErr := decodeSlow(row)
			fast, ok := rr.decodeFast(row, e.SessionID, true)
			// (A row of invalid UTF-8 the fast path reads byte for byte,
			// encoding/json with U+FFFD: no writer makes one.)
			if ok && utf8.Valid(row) && (slowErr != nil || !sameEvent(fast, slow)) {
				t.Fatalf("%s: fast %+v, slow %+v (%v)", row, fast, slow, slowErr)
			}
			if !ok && string(row) == string(event.AppendJSON(nil, &e)) && isPlain(e.SessionID) && e.Type != "" &&
				plainJSON(e.SessionID) && plainJSON(e.Type) && plainJSON(e.TurnID) {
				t.Fatalf("%s: left the fast path", row)
			}
		}
	})
}

// plainJSON reports whether s is written without escapes.
func plainJSON(s string) bool {
	return string(event.AppendString(nil, s)) == `"`+s+`"`
}
