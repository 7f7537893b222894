package lease

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is an injected clock that moves one second per reading.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func openDB(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// probeMap is a Prober answering from a pid table (absent pid: PidAbsent).
type probeMap map[int]Liveness

func (p probeMap) probe(o Owner) Liveness {
	if l, ok := p[o.PID]; ok {
		return l
	}
	return PidAbsent
}

func TestAcquireCommitRelease(t *testing.T) {
	s := openDB(t)
	c := newClock()
	m := New(s.DB, probeMap{}.probe, c.Now)
	const id = "sess-0001"

	r, err := m.Get(id)
	if err != nil || r.Status != Released || r.Fence != 0 {
		t.Fatalf("absent lease: %+v, %v", r, err)
	}
	g, err := m.Acquire(id)
	if err != nil || g.Fence != 1 || g.SpawnToken == "" || g.Evidence != nil {
		t.Fatalf("first acquire: %+v, %v", g, err)
	}
	owner := Owner{PID: 4242, StartTicks: 7, BootID: "b1"}
	if err := m.Commit(id, g.Fence, g.SpawnToken, owner); err != nil {
		t.Fatal(err)
	}
	// A repeated commit of the same owner is idempotent.
	if err := m.Commit(id, g.Fence, g.SpawnToken, owner); err != nil {
		t.Fatalf("repeated commit: %v", err)
	}
	r, _ = m.Get(id)
	want := owner
	want.SpawnToken = g.SpawnToken
	if r.Status != Live || r.Fence != 1 || r.Owner == nil || *r.Owner != want {
		t.Fatalf("after commit: %+v", r)
	}
	if !r.UpdatedAt.After(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("updatedAt not from the injected clock: %v", r.UpdatedAt)
	}
	ev := &Evidence{Kind: EvidenceExitObserved, At: c.Now()}
	ok, err := m.Release(id, 1, ev)
	if !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	r, _ = m.Get(id)
	if r.Status != Released || r.Fence != 1 || r.DeathEvidence == nil || r.DeathEvidence.Kind != EvidenceExitObserved {
		t.Fatalf("after release: %+v", r)
	}
	ok, err = m.Release(id, 1, nil)
	if ok || err != nil {
		t.Fatalf("second release at same fence: %v %v", ok, err)
	}
	g, err = m.Acquire(id)
	if err != nil || g.Fence != 2 || g.Evidence != nil {
		t.Fatalf("acquire after release: %+v %v", g, err)
	}
	all, err := m.List(nil)
	if err != nil || len(all) != 1 || all[id].Fence != 2 {
		t.Fatalf("list: %v %v", all, err)
	}
}

func TestCommitRefusals(t *testing.T) {
	s := openDB(t)
	m := New(s.DB, probeMap{}.probe, newClock().Now)
	tests := []struct {
		name  string
		fence func(g Grant) uint64
		token func(g Grant) string
		want  error
	}{
		{"stale fence", func(g Grant) uint64 { return g.Fence - 1 }, func(g Grant) string { return g.SpawnToken }, ErrStaleFence},
		{"future fence", func(g Grant) uint64 { return g.Fence + 1 }, func(g Grant) string { return g.SpawnToken }, ErrStaleFence},
		{"wrong token", func(g Grant) uint64 { return g.Fence }, func(Grant) string { return "nope" }, ErrNotReserved},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := "sess-" + tc.name
			if _, err := m.Acquire(id); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Release(id, 1, nil); err != nil {
				t.Fatal(err)
			}
			g, err := m.Acquire(id)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := m.Get(id)
			err = m.Commit(id, tc.fence(g), tc.token(g), Owner{PID: 9})
			if !errors.Is(err, tc.want) {
				t.Fatalf("commit: %v, want %v", err, tc.want)
			}
			after, _ := m.Get(id)
			if !sameRecord(before, after) {
				t.Fatalf("refused commit changed the record: %+v -> %+v", before, after)
			}
		})
	}
	if err := m.Commit("sess-none", 0, "", Owner{PID: 1}); !errors.Is(err, ErrNotReserved) {
		t.Fatalf("commit on an absent lease: %v", err)
	}
}

func TestAcquireOverOwner(t *testing.T) {
	tests := []struct {
		name     string
		live     Liveness
		want     error
		evidence EvidenceKind
	}{
		{"alive", Alive, ErrOwned, ""},
		{"unverifiable", Unverifiable, ErrUnverifiable, ""},
		{"pid absent", PidAbsent, nil, EvidencePidAbsent},
		{"identity mismatch", IdentityMismatch, nil, EvidenceIdentityMismatch},
		{"boot changed", BootChanged, nil, EvidenceBootChanged},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openDB(t)
			probes := 0
			m := New(s.DB, func(o Owner) Liveness {
				probes++
				if o.PID != 77 || o.StartTicks != 5 || o.BootID != "boot" {
					t.Errorf("probed %+v", o)
				}
				return tc.live
			}, newClock().Now)
			const id = "sess-owner"
			g, _ := m.Acquire(id)
			if err := m.Commit(id, g.Fence, g.SpawnToken, Owner{PID: 77, StartTicks: 5, BootID: "boot"}); err != nil {
				t.Fatal(err)
			}
			before, _ := m.Get(id)
			g2, err := m.Acquire(id)
			if probes != 1 {
				t.Fatalf("probes = %d, want 1", probes)
			}
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("acquire: %v, want %v", err, tc.want)
				}
				after, _ := m.Get(id)
				if !sameRecord(before, after) {
					t.Fatalf("refused acquire changed the record")
				}
				return
			}
			if err != nil || g2.Fence != 2 || g2.Evidence == nil || g2.Evidence.Kind != tc.evidence {
				t.Fatalf("acquire over dead owner: %+v %v", g2, err)
			}
			r, _ := m.Get(id)
			if r.Status != Reserved || r.DeathEvidence == nil || r.DeathEvidence.Kind != tc.evidence {
				t.Fatalf("record: %+v", r)
			}
		})
	}
}

func TestOwnedErrorCarriesPID(t *testing.T) {
	s := openDB(t)
	m := New(s.DB, probeMap{31: Alive}.probe, nil)
	g, _ := m.Acquire("sess-pid")
	if err := m.Commit("sess-pid", g.Fence, g.SpawnToken, Owner{PID: 31}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Acquire("sess-pid")
	var oe *OwnedError
	if !errors.As(err, &oe) || oe.PID != 31 || !errors.Is(err, ErrOwned) {
		t.Fatalf("err = %#v", err)
	}
}

func TestReservationWithoutProcessIsUnverifiable(t *testing.T) {
	s := openDB(t)
	probed := false
	m := New(s.DB, func(Owner) Liveness { probed = true; return PidAbsent }, nil)
	g, _ := m.Acquire("sess-res")
	if _, err := m.Acquire("sess-res"); !errors.Is(err, ErrUnverifiable) {
		t.Fatalf("acquire over a bare reservation: %v", err)
	}
	if probed {
		t.Fatal("probed an owner with no pid")
	}
	if ok, err := m.Release("sess-res", g.Fence, nil); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
}

func TestStaleReleaseChangesNothing(t *testing.T) {
	s := openDB(t)
	m := New(s.DB, probeMap{}.probe, newClock().Now)
	const id = "sess-stale"
	g, _ := m.Acquire(id)
	_ = m.Commit(id, g.Fence, g.SpawnToken, Owner{PID: 5})
	g2, err := m.Acquire(id) // pid 5 absent: granted over it
	if err != nil {
		t.Fatal(err)
	}
	before, _ := m.Get(id)
	ok, err := m.Release(id, g.Fence, &Evidence{Kind: EvidenceExitObserved})
	if ok || !errors.Is(err, ErrStaleFence) {
		t.Fatalf("stale release: %v %v", ok, err)
	}
	after, _ := m.Get(id)
	if !sameRecord(before, after) || after.Fence != g2.Fence {
		t.Fatalf("stale release changed the record: %+v -> %+v", before, after)
	}
}

func TestDelete(t *testing.T) {
	s := openDB(t)
	m := New(s.DB, probeMap{}.probe, nil)
	g, _ := m.Acquire("sess-del")
	if err := m.Delete("sess-del"); !errors.Is(err, ErrNotReleased) {
		t.Fatalf("delete reserved: %v", err)
	}
	_, _ = m.Release("sess-del", g.Fence, nil)
	if err := m.Delete("sess-del"); err != nil {
		t.Fatal(err)
	}
	if r, _ := m.Get("sess-del"); r.Fence != 0 {
		t.Fatalf("after delete: %+v", r)
	}
}
