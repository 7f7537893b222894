package lease

import (
	"errors"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/store"
)

func TestConcurrentAcquireOneWinner(t *testing.T) {
	s := openDB(t)
	m := New(s.DB, func(Owner) Liveness { return Alive }, nil)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := m.Acquire("sess-race")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	wins := 0
	for err := range errs {
		if err == nil {
			wins++
		} else if !errors.Is(err, ErrUnverifiable) {
			t.Errorf("loser: %v", err)
		}
	}
	if r, _ := m.Get("sess-race"); wins != 1 || r.Fence != 1 {
		t.Fatalf("wins = %d, record %+v", wins, r)
	}
}

func TestStatusText(t *testing.T) {
	for _, st := range []Status{Released, Reserved, Live} {
		b, err := st.MarshalText()
		var back Status
		if err != nil || back.UnmarshalText(b) != nil || back != st {
			t.Fatalf("%v: %s %v", st, b, err)
		}
	}
	var s Status
	if err := s.UnmarshalText([]byte("zombie")); !errors.Is(err, ErrBadStatus) {
		t.Fatalf("bad status: %v", err)
	}
}

func sameRecord(a, b Record) bool {
	if a.Fence != b.Fence || a.Status != b.Status || !a.UpdatedAt.Equal(b.UpdatedAt) {
		return false
	}
	if (a.Owner == nil) != (b.Owner == nil) || (a.Owner != nil && *a.Owner != *b.Owner) {
		return false
	}
	if (a.DeathEvidence == nil) != (b.DeathEvidence == nil) {
		return false
	}
	return a.DeathEvidence == nil || *a.DeathEvidence == *b.DeathEvidence ||
		(a.DeathEvidence.Kind == b.DeathEvidence.Kind && a.DeathEvidence.At.Equal(b.DeathEvidence.At))
}

// TestStoreFailureIsUnavailable: a lease transition the store cannot
// commit says so (store.ErrUnavailable), not a lease refusal.
func TestStoreFailureIsUnavailable(t *testing.T) {
	s := openDB(t)
	m := New(s.DB, func(Owner) Liveness { return Alive }, nil)
	g, err := m.Acquire("sess-full")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := m.Release("sess-full", g.Fence, nil); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, ErrStaleFence) {
		t.Fatalf("release on a closed store: %v, want store.ErrUnavailable", err)
	}
	if _, err := m.Acquire("sess-other"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("acquire on a closed store: %v, want store.ErrUnavailable", err)
	}
}
