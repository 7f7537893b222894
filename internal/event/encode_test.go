package event

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// same compares what the wire carries of two events.
func same(a, b Event) bool {
	return a.SessionID == b.SessionID && a.Seq == b.Seq && a.At.Equal(b.At) && a.Type == b.Type &&
		a.TurnID == b.TurnID && jsonEqual(a.Data, b.Data)
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b) || string(a) == "null" || string(b) == "null"
	}
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}

func TestAppendJSON(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	tests := []struct {
		name    string
		ev      Event
		marshal bool // byte for byte json.Marshal's
	}{
		{"minimal", Event{SessionID: "s_1", Seq: 1, At: at, Type: MessageDelta}, true},
		{"turn and data", Event{SessionID: "s_1", Seq: 99, At: at, Type: MessageDelta, TurnID: "t_1", Data: json.RawMessage(`{"text":"hi there"}`)}, true},
		{"zero time", Event{Type: SessionCreated}, true},
		{"local zone", Event{Type: TurnStarted, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", -5*3600-1800))}, true},
		{"escapes in strings", Event{SessionID: "s\"<", Type: "a\u2028\n", TurnID: "é\x01", At: at}, true},
		{"invalid utf8 string", Event{SessionID: "\xff", Type: "x"}, true},
		{"null data", Event{Type: "x", Data: json.RawMessage(`null`)}, true},
		// Data goes out as it was handed in: valid, maybe not compact.
		{"blanks in data", Event{Type: MessageDelta, Data: json.RawMessage("{ \"text\" :\n\"a b\" }")}, false},
		{"html in data", Event{Type: MessageDelta, Data: json.RawMessage(`{"text":"<a & b>"}`)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendJSON([]byte("prefix"), &tt.ev)
			body, ok := bytes.CutPrefix(got, []byte("prefix"))
			var back Event
			lossy := tt.ev.SessionID == "\xff" // invalid UTF-8 becomes U+FFFD, as json.Marshal does
			if !ok || !json.Valid(body) || json.Unmarshal(body, &back) != nil || !same(back, tt.ev) && !lossy {
				t.Fatalf("AppendJSON wrote %s", got)
			}
			if want, _ := json.Marshal(&tt.ev); tt.marshal && !bytes.Equal(body, want) {
				t.Fatalf("got  %s\nwant %s", body, want)
			}
			if EncodedSize(&Event{Raw: body}) != len(body) {
				t.Fatal("EncodedSize of a raw event")
			}
		})
	}
	if y := (Event{Type: "x", At: time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC)}); !json.Valid(AppendJSON(nil, &y)) {
		t.Fatalf("year out of range: %s", AppendJSON(nil, &y))
	}
}

// TestAppendJSONSplicesRaw: an event handed out by the journal goes out
// as stored, whatever its decoded fields say.
func TestAppendJSONSplicesRaw(t *testing.T) {
	raw := json.RawMessage(`{"sessionId":"s","seq":4,"at":"2026-01-01T00:00:00Z","type":"x","data":{ "a" : 1 }}`)
	ev := Event{SessionID: "other", Seq: 5, Type: "y", Raw: raw}
	if got := AppendJSON(nil, &ev); !bytes.Equal(got, raw) {
		t.Fatalf("got %s", got)
	}
	if got := AppendEvents([]byte("x"), []Event{ev, ev}); string(got) != "x["+string(raw)+","+string(raw)+"]" {
		t.Fatalf("events: %s", got)
	}
}

func TestAppendEventsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		texts := rapid.SliceOfN(rapid.String(), 0, 5).Draw(t, "texts")
		evs := make([]Event, len(texts))
		for i, s := range texts {
			data, _ := json.Marshal(map[string]string{"text": s})
			if rapid.Bool().Draw(t, "indent") {
				var buf bytes.Buffer
				json.Indent(&buf, data, "", " ")
				data = buf.Bytes()
			}
			evs[i] = Event{
				SessionID: rapid.String().Draw(t, "sid"), Seq: rapid.Uint64().Draw(t, "seq"),
				At:   time.Unix(rapid.Int64Range(-6e10, 2.5e11).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "ns")).UTC(),
				Type: rapid.StringMatching(`[a-z.<&]{1,12}`).Draw(t, "type"), TurnID: rapid.String().Draw(t, "turn"),
				Data: data,
			}
		}
		got := AppendEvents(nil, evs)
		var back []Event
		if err := json.Unmarshal(got, &back); err != nil || len(back) != len(evs) {
			t.Fatalf("%s: %v", got, err)
		}
		for i := range evs {
			if !same(back[i], evs[i]) {
				t.Fatalf("event %d: %+v, want %+v", i, back[i], evs[i])
			}
		}
	})
}

func TestAppendEventsNil(t *testing.T) {
	if got := AppendEvents(nil, nil); string(got) != "[]" {
		t.Fatalf("AppendEvents(nil) = %q; want []", got)
	}
}
