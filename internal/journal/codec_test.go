package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

func TestCodecRoundTrip(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC)
	tests := []struct {
		name string
		ev   event.Event
	}{
		{"plain", event.Event{SessionID: "s_1", Seq: 7, At: at, Type: event.MessageDelta, TurnID: "t_1", Data: json.RawMessage(`{"text":"hi"}`)}},
		{"no turn no data", event.Event{SessionID: "s_1", Seq: 1, At: at, Type: event.SessionCreated}},
		{"escapes", event.Event{SessionID: "s\"1", Seq: 2, At: at, Type: "x.\u00e9<y>", TurnID: "t\\n\n", Data: json.RawMessage(`{"text":"a\"b\\c\u2028","n":[1,{"x":null}]}`)}},
		{"data not an object", event.Event{SessionID: "s", Seq: 3, At: at, Type: "custom.type", Data: json.RawMessage(`"str"`)}},
		{"large seq", event.Event{SessionID: "s", Seq: 1<<64 - 1, At: at, Type: event.TurnStarted}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := event.AppendJSON(nil, &tc.ev)
			if !json.Valid(b) {
				t.Fatalf("encode: %s", b)
			}
			var viaJSON event.Event
			if err := json.Unmarshal(b, &viaJSON); err != nil || !sameEvent(viaJSON, tc.ev) {
				t.Fatalf("encoding/json reads %+v (%v)", viaJSON, err)
			}
			got, err := decodeEvent(b)
			if err != nil || !sameEvent(got, tc.ev) {
				t.Fatalf("decode: %+v %v", got, err)
			}
		})
	}
}

func TestDecodeOtherShapes(t *testing.T) {
	tests := []struct {
		name string
		row  string
		ok   bool
	}{
		{"other field order", `{"type":"message.delta","seq":3,"sessionId":"s","at":"2026-01-01T00:00:00Z","data":{"text":"x"}}`, true},
		{"spaces", `{ "sessionId": "s", "seq": 3, "at": "2026-01-01T00:00:00Z", "type": "turn.started" }`, true},
		{"truncated data", `{"sessionId":"s","seq":3,"at":"2026-01-01T00:00:00Z","type":"x","data":{"text":"x"}`, false},
		{"no type", `{"sessionId":"s","seq":3}`, false},
		{"binary", "\x00\x01\x02", false},
		{"empty", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := decodeEvent([]byte(tc.row))
			if (err == nil) != tc.ok {
				t.Fatalf("decode: %+v %v, want ok=%v", ev, err, tc.ok)
			}
		})
	}
}

func TestAppendRefusesDataThatIsNotJSON(t *testing.T) {
	j, _ := open(t, Options{})
	d := event.Draft{Type: event.MessageDelta, Data: json.RawMessage(`{"text":`)}
	if _, err := j.Append(context.Background(), "sess-json", d); !errors.Is(err, ErrBadDraft) {
		t.Fatalf("append: %v", err)
	}
	// A sink cannot answer: the refused draft is journaled as a loss.
	s := j.Sink("sess-json")
	s.Append(d)
	if err := s.Drain(context.Background()); err != nil || j.Stats().Lost != 1 || j.State("sess-json").Lost != 1 {
		t.Fatalf("sink: %v %+v", err, j.Stats())
	}
	evs, _, _, _ := j.Read("sess-json", 0, 10)
	if len(evs) != 1 || evs[0].Type != event.JournalLoss {
		t.Fatalf("journal: %+v", evs)
	}
}

func sameEvent(a, b event.Event) bool {
	return a.SessionID == b.SessionID && a.Seq == b.Seq && a.At.Equal(b.At) && a.Type == b.Type &&
		a.TurnID == b.TurnID && string(a.Data) == string(b.Data)
}

func TestDataRoundTrip(t *testing.T) {
	j, _ := open(t, Options{})
	raw := json.RawMessage(`{"requestId":"r9","kind":"exec","detail":{"cmd":["ls","-l"]}}`)
	mustAppend(t, j, "sess-rt", event.Draft{Type: event.ApprovalRequested, TurnID: "t", Data: raw})
	evs, _, _, _ := j.Read("sess-rt", 0, 1)
	if !bytes.Equal(evs[0].Data, raw) {
		t.Fatalf("data %s", evs[0].Data)
	}
}
