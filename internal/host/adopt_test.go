package host

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/store"
)

// TestAdoptFailsWhenASessionCannotBeAdopted: sessions are adopted side by
// side; one that cannot be adopted (here: no such session in the store)
// still fails the whole adoption (the new image then exits and the next
// start reaps as after a crash), with more sessions than workers, and
// nothing is left in the map.
func TestAdoptFailsWhenASessionCannotBeAdopted(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	j, err := journal.Open(st.DB, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	h, err := New(Options{Store: st, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	var sessions []HandoffSession
	for i := range 4*adoptWorkers() + 1 {
		sessions = append(sessions, HandoffSession{ID: fmt.Sprintf("s_MISSING%02d", i), Fence: 1})
	}
	err = h.Adopt(context.Background(), nil, sessions)
	if err == nil || !strings.Contains(err.Error(), "adopt session s_MISSING") {
		t.Fatalf("Adopt of unknown sessions: %v, want an error naming one", err)
	}
	h.mu.Lock()
	n := len(h.sessions)
	h.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d sessions in the map after a failed adoption", n)
	}
}
