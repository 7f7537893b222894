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

func TestAppendJSONMatchesMarshal(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	tests := []struct {
		name string
		ev   Event
	}{
		{"minimal", Event{SessionID: "s_1", Seq: 1, At: at, Type: MessageDelta}},
		{"turn and data", Event{SessionID: "s_1", Seq: 99, At: at, Type: MessageDelta, TurnID: "t_1", Data: json.RawMessage(`{"text":"hi there"}`)}},
		{"zero time", Event{Type: SessionCreated}},
		{"local zone", Event{Type: TurnStarted, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", -5*3600-1800))}},
		{"year out of range", Event{Type: TurnStarted, At: time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"blanks in data", Event{Type: MessageDelta, Data: json.RawMessage("{ \"text\" :\n\"a b\" }")}},
		{"html in data", Event{Type: MessageDelta, Data: json.RawMessage(`{"text":"<a & b>"}`)}},
		{"line separator in data", Event{Type: MessageDelta, Data: json.RawMessage("{\"text\":\"a\u2028b\u2029\"}")}},
		{"other E2 rune in data", Event{Type: MessageDelta, Data: json.RawMessage("{\"text\":\"\u201cq\u201d \u2026\"}")}},
		{"escaped quote before html", Event{Type: MessageDelta, Data: json.RawMessage(`{"text":"\"<"}`)}},
		{"escaped backslash at end", Event{Type: MessageDelta, Data: json.RawMessage(`{"text":"\\","n":[1, 2]}`)}},
		{"escapes in strings", Event{SessionID: "s\"<", Type: "a\u2028\n", TurnID: "é\x01", At: at}},
		{"invalid utf8 string", Event{SessionID: "\xff", Type: "x"}},
		{"null data", Event{Type: "x", Data: json.RawMessage(`null`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, werr := json.Marshal(&tt.ev)
			got, gerr := AppendJSON([]byte("prefix"), &tt.ev)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("error %v, json.Marshal's %v", gerr, werr)
			}
			if werr == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Fatalf("got  %s\nwant prefix%s", got, want)
			}
		})
	}
}

func TestAppendEventsMatchesMarshal(t *testing.T) {
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
				At:   time.Unix(rapid.Int64Range(-1e11, 1e11).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "ns")),
				Type: rapid.StringMatching(`[a-z.<&]{1,12}`).Draw(t, "type"), TurnID: rapid.String().Draw(t, "turn"),
				Data: data,
			}
		}
		want, werr := json.Marshal(evs)
		got, gerr := AppendEvents(nil, evs)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("error %v, json.Marshal's %v", gerr, werr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
}

func TestAppendEventsNil(t *testing.T) {
	got, err := AppendEvents(nil, nil)
	if err != nil || string(got) != "[]" {
		t.Fatalf("AppendEvents(nil) = %q, %v; want []", got, err)
	}
}
