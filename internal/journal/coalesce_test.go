package journal

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

func itemDelta(turn, item, stream, text string) event.Draft {
	return event.New(event.ItemDelta, turn, event.ItemDeltaData{ItemID: item, Stream: stream, Text: text})
}

func msgDelta(turn, item, text string) event.Draft {
	return event.New(event.MessageDelta, turn, event.DeltaData{ItemID: item, Text: text})
}

// TestSinkCoalescesItemDeltas: item.delta merges like message.delta, but
// only within one item and stream; message.delta of two items stays apart.
func TestSinkCoalescesItemDeltas(t *testing.T) {
	tests := []struct {
		name string
		in   []event.Draft
		want []string
	}{
		{"one item and stream", []event.Draft{itemDelta("t", "c1", "output", "a"), itemDelta("t", "c1", "output", "b")}, []string{"ab"}},
		{"item change", []event.Draft{itemDelta("t", "c1", "output", "a"), itemDelta("t", "c2", "output", "b")}, []string{"a", "b"}},
		{"stream change", []event.Draft{itemDelta("t", "r", "reasoning", "a"), itemDelta("t", "r", "reasoningSummary", "b")}, []string{"a", "b"}},
		{"type change", []event.Draft{itemDelta("t", "m", "", "a"), msgDelta("t", "m", "b")}, []string{"a", "b"}},
		{"message items", []event.Draft{msgDelta("t", "m1", "a"), msgDelta("t", "m1", "b"), msgDelta("t", "m2", "c")}, []string{"ab", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, _ := open(t, Options{CoalesceWindow: time.Hour})
			s := j.Sink("sess-items")
			for _, d := range tc.in {
				s.Append(d)
			}
			if err := s.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			evs, _, _, _ := j.Read("sess-items", 0, 100)
			if got := deltaTexts(evs); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// deltaTexts is each event's data.text.
func deltaTexts(evs []event.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		var d struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(e.Data, &d)
		out[i] = d.Text
	}
	return out
}
