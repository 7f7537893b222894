package journal

import (
	"context"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	bolt "go.etcd.io/bbolt"
)

// TestOpenTurns: a journal whose last turn event is a turn.started is
// open (events after it do not close it), one that ends with
// turn.completed or has no turn is not, and every journal is counted.
func TestOpenTurns(t *testing.T) {
	j, st := open(t, Options{})
	ctx := context.Background()
	started := func(turn string) event.Draft {
		return event.New(event.TurnStarted, turn, event.TurnStartedData{TurnID: turn, Text: "hi"})
	}
	completed := func(turn string) event.Draft {
		return event.New(event.TurnCompleted, turn, event.TurnCompletedData{Status: event.StatusCompleted})
	}
	for id, ds := range map[string][]event.Draft{
		"sess-open":   {event.New(event.SessionCreated, "", nil), started("t1"), completed("t1"), started("t2"), delta("t2", "a")},
		"sess-closed": {event.New(event.SessionCreated, "", nil), started("t1"), delta("t1", "a"), completed("t1")},
		"sess-idle":   {event.New(event.SessionCreated, "", nil)},
	} {
		if _, err := j.Append(ctx, id, ds...); err != nil {
			t.Fatal(err)
		}
	}
	var open []OpenTurn
	var n int
	if err := st.DB.View(func(tx *bolt.Tx) error { open, n = OpenTurns(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []OpenTurn{{SessionID: "sess-open", TurnID: "t2", Seq: 4}}; n != 3 || !slices.Equal(open, want) {
		t.Fatalf("OpenTurns = %+v, %d journals; want %+v, 3", open, n, want)
	}
}
