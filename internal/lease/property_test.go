package lease

import (
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// world is the fake machine the property test runs the lease against: the
// processes that exist, which of them committed as owner (and at which fence),
// and the grants handed out (current and stale).
type world struct {
	m       *Manager
	id      string
	alive   map[int]bool
	owners  map[int]uint64 // committed owner pid -> fence it committed at
	grants  []Grant
	nextPID int
	unsure  bool // the next probe answers Unverifiable
	maxSeen uint64
}

func (w *world) probe(o Owner) Liveness {
	if w.unsure {
		return Unverifiable
	}
	if w.alive[o.PID] {
		return Alive
	}
	return []Liveness{PidAbsent, IdentityMismatch, BootChanged}[o.PID%3]
}

func (w *world) get(t *rapid.T) Record {
	r, err := w.m.Get(w.id)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	return r
}

// check holds after every action.
func (w *world) check(t *rapid.T) {
	r := w.get(t)
	if r.Fence < w.maxSeen {
		t.Fatalf("fence went down: %d after %d", r.Fence, w.maxSeen)
	}
	w.maxSeen = r.Fence
	live := 0
	for pid, fence := range w.owners {
		if !w.alive[pid] {
			continue
		}
		live++
		if r.Status != Live || r.Owner == nil || r.Owner.PID != pid || r.Fence != fence {
			t.Fatalf("pid %d (fence %d) runs as owner but the lease is %+v", pid, fence, r)
		}
	}
	if live > 1 {
		t.Fatalf("%d live owners", live)
	}
	if r.Status == Live && (r.Owner == nil || r.Owner.PID == 0) {
		t.Fatalf("live lease without an owner: %+v", r)
	}
}

func (w *world) acquire(t *rapid.T) {
	w.unsure = rapid.IntRange(0, 4).Draw(t, "unsure") == 0
	before := w.get(t)
	g, err := w.m.Acquire(w.id)
	if err != nil {
		if before.Status == Released {
			t.Fatalf("acquire of a released lease failed: %v", err)
		}
		if !errors.Is(err, ErrOwned) && !errors.Is(err, ErrUnverifiable) {
			t.Fatalf("acquire: unexpected %v", err)
		}
		if after := w.get(t); !sameRecord(before, after) {
			t.Fatalf("refused acquire changed the record: %+v -> %+v", before, after)
		}
		return
	}
	if g.Fence != before.Fence+1 {
		t.Fatalf("granted fence %d over %d", g.Fence, before.Fence)
	}
	if before.Status != Released {
		if g.Evidence == nil {
			t.Fatalf("grant over %s owner %+v without evidence", before.Status, before.Owner)
		}
		if before.Owner != nil && w.alive[before.Owner.PID] {
			t.Fatalf("granted over a live owner %d", before.Owner.PID)
		}
	}
	w.grants = append(w.grants, g)
}

func (w *world) commit(t *rapid.T) {
	if len(w.grants) == 0 {
		t.Skip("no grant")
	}
	g := rapid.SampledFrom(w.grants).Draw(t, "grant")
	if rapid.IntRange(0, 5).Draw(t, "badToken") == 0 {
		g.SpawnToken = "forged"
	}
	w.nextPID++
	pid := w.nextPID
	w.alive[pid] = true // the spawn started its process
	before := w.get(t)
	err := w.m.Commit(w.id, g.Fence, g.SpawnToken, Owner{PID: pid, BootID: "b"})
	ok := before.Fence == g.Fence && before.Status == Reserved && before.Owner.SpawnToken == g.SpawnToken
	if (err == nil) != ok {
		t.Fatalf("commit %+v over %+v: err %v, expected ok=%v", g, before, err, ok)
	}
	if err != nil {
		w.alive[pid] = false // the spawner stops the child it could not commit
		return
	}
	w.owners[pid] = g.Fence
}

func (w *world) release(t *rapid.T) {
	r := w.get(t)
	ok, err := w.m.Release(w.id, r.Fence, &Evidence{Kind: EvidenceExitObserved})
	if err != nil || ok != (r.Status != Released) {
		t.Fatalf("release at current fence of %+v: %v %v", r, ok, err)
	}
	if r.Owner != nil {
		w.alive[r.Owner.PID] = false // released after its exit was observed
	}
}

func (w *world) staleRelease(t *rapid.T) {
	r := w.get(t)
	if r.Fence < 2 {
		t.Skip("no older fence")
	}
	f := rapid.Uint64Range(1, r.Fence-1).Draw(t, "fence")
	ok, err := w.m.Release(w.id, f, nil)
	if ok || !errors.Is(err, ErrStaleFence) {
		t.Fatalf("stale release at %d of %+v: %v %v", f, r, ok, err)
	}
	if after := w.get(t); !sameRecord(r, after) {
		t.Fatalf("stale release changed the record: %+v -> %+v", r, after)
	}
}

func (w *world) ownerDies(t *rapid.T) {
	var pids []int
	for pid, a := range w.alive {
		if a {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		t.Skip("nobody alive")
	}
	w.alive[rapid.SampledFrom(pids).Draw(t, "pid")] = false
}

// TestLeaseProperties runs random interleavings of acquire, commit (current,
// stale or forged), release, stale release and owner death, checking after
// each: the fence never decreases, at most one live owner, a stale release
// or a refused acquire never changes the record, every grant over a previous
// owner carries evidence and is never over a live one.
func TestLeaseProperties(t *testing.T) {
	s := openDB(t)
	s.DB.NoSync = true // speed only: durability is not under test here
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		n++
		w := &world{id: fmt.Sprintf("sess-prop-%d", n), alive: map[int]bool{}, owners: map[int]uint64{}}
		w.m = New(s.DB, w.probe, newClock().Now)
		t.Repeat(map[string]func(*rapid.T){
			"acquire":      w.acquire,
			"commit":       w.commit,
			"release":      w.release,
			"staleRelease": w.staleRelease,
			"ownerDies":    w.ownerDies,
			"":             w.check,
		})
	})
}
