package journal

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// TestDeltaPartsCoalesceAsDecoded: deltas built with their parts
// (event.NewMessageDelta, event.NewItemDelta: what the adapters emit) are
// journaled exactly as the same deltas decoded from their data, merging
// and breaking at the same places (turn, item and stream changes, another
// type, the byte cap, text that needs escaping), and the coalescer decodes
// none of them (red when it ignores the parts, or when the parts lose a
// field of the key).
func TestDeltaPartsCoalesceAsDecoded(t *testing.T) {
	type step struct {
		msg          bool
		turn, item   string
		stream, text string
	}
	steps := []step{
		{true, "t1", "m1", "", "he"}, {true, "t1", "m1", "", "llo \"q\"\n"},
		{true, "t1", "m2", "", "é"}, {false, "t1", "r1", event.StreamReasoning, "th"},
		{false, "t1", "r1", event.StreamReasoning, "ink"}, {false, "t1", "r1", event.StreamOutput, "out"},
		{false, "t1", "r2", event.StreamReasoning, "x"}, {true, "t2", "m1", "", "next"},
		{true, "t2", "m1", "", "0123456789abcdef"}, {true, "t2", "m1", "", ""},
		{false, "t2", "c1", event.StreamOutput, "</\u2028>"}, {false, "t2", "c1", event.StreamOutput, "tail"},
	}
	build := func(s step, parts bool) event.Draft {
		if s.msg {
			d := event.DeltaData{Text: s.text, ItemID: s.item, ProviderTurnID: "p-" + s.turn}
			if parts {
				return event.NewMessageDelta(s.turn, d)
			}
			return event.New(event.MessageDelta, s.turn, d)
		}
		d := event.ItemDeltaData{ItemID: s.item, Stream: s.stream, Text: s.text}
		if parts {
			return event.NewItemDelta(s.turn, d)
		}
		return event.New(event.ItemDelta, s.turn, d)
	}
	journaled := func(parts bool) ([]event.Event, uint64) {
		j, _ := open(t, Options{CoalesceWindow: time.Hour, CoalesceBytes: 12})
		s := j.Sink("sess-parts")
		before := decodedDeltas.Load()
		for i, st := range steps {
			s.Append(build(st, parts))
			if i == 7 {
				s.Append(event.New(event.MessageCompleted, st.turn, event.DeltaData{Text: "done"}))
			}
		}
		if err := s.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		decoded := decodedDeltas.Load() - before
		evs, _, _, err := j.Read("sess-parts", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return evs, decoded
	}
	want, decodedWant := journaled(false)
	got, decoded := journaled(true)
	if decodedWant == 0 {
		t.Fatal("the decoding path was not taken by drafts without parts: the hook counts nothing")
	}
	if decoded != 0 {
		t.Fatalf("the coalescer decoded %d deltas that carried their parts", decoded)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events with parts, %d decoded:\n%s\n%s", len(got), len(want), dump(got), dump(want))
	}
	for i := range want {
		if got[i].Type != want[i].Type || got[i].TurnID != want[i].TurnID || string(got[i].Data) != string(want[i].Data) {
			t.Fatalf("event %d: with parts %s %s %s, decoded %s %s %s", i,
				got[i].Type, got[i].TurnID, got[i].Data, want[i].Type, want[i].TurnID, want[i].Data)
		}
	}
}

func dump(evs []event.Event) string {
	b, _ := json.Marshal(evs)
	return string(b)
}
