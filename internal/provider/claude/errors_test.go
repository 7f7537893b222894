package claude

import (
	"errors"
	"testing"

	"github.com/sessiond/sessiond/internal/provider"
)

// TestStartTurnErrorKinds: a turn whose user message cannot be written
// fails with the provider's typed kind: ErrStopping when the host stopped
// the writes (the turn stays open: the teardown under way ends it), and a
// turn while one is open ErrTurnRunning.
func TestStartTurnErrorKinds(t *testing.T) {
	f := newFake(t, nil)
	f.started(t) // turn t_1 open
	if err := f.a.StartTurn(t.Context(), "t_2", "again"); !errors.Is(err, provider.ErrTurnRunning) {
		t.Fatalf("second turn: %v", err)
	}
	f.send(t, map[string]any{"type": "result", "subtype": "success", "session_id": "sess-1", "result": "ok"})
	f.next(t, "turn.completed")
	f.a.CancelWrites()
	err := f.a.StartTurn(t.Context(), "t_3", "hi")
	if !errors.Is(err, provider.ErrStopping) || errors.Is(err, provider.ErrExited) {
		t.Fatalf("turn after CancelWrites: %v, want ErrStopping", err)
	}
	if !f.a.Busy() {
		t.Fatal("a turn whose write the host stopped was dropped: the teardown must end it")
	}
}
