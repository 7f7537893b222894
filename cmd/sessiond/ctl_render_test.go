package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

func ev(typ, turn string, data any) event.Event {
	d := event.New(typ, turn, data)
	return event.Event{Type: d.Type, TurnID: d.TurnID, Data: d.Data}
}

// TestRendererWholeReply: a reply that came only as message.completed (no
// deltas, as codex sends when the model streamed none) is printed whole;
// a streamed one is not printed twice; control characters are escaped.
func TestRendererWholeReply(t *testing.T) {
	var b bytes.Buffer
	r := newRenderer(&b, "s_1", true)
	for _, e := range []event.Event{
		ev(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "hi\x1b[31m"}),
		ev(event.MessageCompleted, "t1", event.DeltaData{Text: "whole reply", ItemID: "m1"}),
		ev(event.TurnCompleted, "t1", event.TurnCompletedData{Status: "completed"}),
		ev(event.MessageDelta, "t2", event.DeltaData{Text: "stre", ItemID: "m2"}),
		ev(event.MessageDelta, "t2", event.DeltaData{Text: "amed", ItemID: "m2"}),
		ev(event.MessageCompleted, "t2", event.DeltaData{Text: "streamed", ItemID: "m2"}),
		ev(event.TurnCompleted, "t2", event.TurnCompletedData{Status: "interrupted", Reason: "user_cancel"}),
	} {
		r.event(e)
	}
	got := b.String()
	want := "> hi\\x1b[31m\nwhole reply\nstreamed\nturn interrupted user_cancel\n"
	if got != want {
		t.Fatalf("rendered\n%q\nwant\n%q", got, want)
	}
	if strings.Count(got, "streamed") != 1 {
		t.Fatal("a streamed reply printed twice")
	}
}
