package host

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/store"
)

// runtimeRecord reads rt's record (ok false: none).
func (f *fixture) runtimeRecord(id string) (store.RuntimeRecord, bool) {
	f.t.Helper()
	r, err := f.st.GetRuntime(id)
	if errors.Is(err, store.ErrNotFound) {
		return r, false
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return r, true
}

// TestRuntimeRecordLifecycle: a shared runtime's record names its process
// (as a lease names its owner) and its bound sessions from the first
// bind; each bind and unbind rewrites them; while its process is being
// stopped the record is still there, and once it is proven gone the
// record is deleted.
func TestRuntimeRecordLifecycle(t *testing.T) {
	f := newFixture(t)
	a, b := f.create("shared"), f.create("shared")
	f.hold(a, "w", "c1")
	f.hold(b, "w", "c1")
	si := f.info(a)
	r, ok := f.runtimeRecord(si.RuntimeID)
	if !ok {
		t.Fatal("no record of a live runtime")
	}
	lr, _ := f.h.leases.Get(a)
	if r.Owner.PID != si.PID || r.Owner.StartTicks != lr.Owner.StartTicks || r.Owner.BootID != lr.Owner.BootID ||
		r.Owner.SpawnToken == "" || r.Profile != "shared" || r.Account != defaultAccount || r.StartedAt.IsZero() {
		t.Fatalf("record %+v, runtime pid %d, lease owner %+v", r, si.PID, lr.Owner)
	}
	if want := slices.Sorted(slices.Values([]string{a, b})); !slices.Equal(r.Sessions, want) {
		t.Fatalf("bound sessions %v, want %v", r.Sessions, want)
	}
	if st := f.h.Stats()["staleRuntimeRecords"].([]StaleRuntimeRecord); len(st) != 0 {
		t.Fatalf("a live runtime's record reported stale: %+v", st)
	}
	if _, err := f.h.Close(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if r, _ := f.runtimeRecord(si.RuntimeID); !slices.Equal(r.Sessions, []string{b}) {
		t.Fatalf("after a's close: bound %v, want [%s]", r.Sessions, b)
	}
	if _, err := f.h.Release(context.Background(), "c1", api.ReleaseParams{SessionID: b, HolderID: "w"}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(idle) // b's release clock: the runtime is idle, no lease names it
	r, ok = f.runtimeRecord(si.RuntimeID)
	if !ok || len(r.Sessions) != 0 {
		t.Fatalf("idle runtime's record %+v (present %v), want one with no session", r, ok)
	}
	real := f.h.stopChild
	f.h.stopChild = func(ctx context.Context, c *proc.Child, l proc.Ladder) proc.Verdict {
		if _, ok := f.runtimeRecord(si.RuntimeID); !ok {
			t.Error("the runtime's record was deleted before its process was proven gone")
		}
		return real(ctx, c, l)
	}
	f.h.mu.Lock()
	rt := f.h.runtimes[runtimeKey{"shared", defaultAccount}]
	f.h.mu.Unlock()
	f.clk.Advance(idle) // the runtime's clock
	select {
	case <-rt.gone:
	case <-time.After(20 * time.Second):
		t.Fatal("the runtime was not forgotten after its release clock")
	}
	if r, ok := f.runtimeRecord(si.RuntimeID); ok {
		t.Fatalf("record of a runtime proven gone is still there: %+v", r)
	}
	f.h.stopChild = real
	f.hold(a, "w", "c1")
	if n := f.info(a); n.RuntimeID == si.RuntimeID {
		t.Fatal("re-hold reused the stopped runtime")
	} else if r, ok := f.runtimeRecord(n.RuntimeID); !ok || !slices.Equal(r.Sessions, []string{a}) {
		t.Fatalf("new runtime's record %+v (present %v)", r, ok)
	}
}

// TestRuntimeRecordKeptWhileExitUnproven: a runtime whose process cannot
// be proven gone keeps its record, and so does one whose process exited
// but whose tree is not proven gone (the next startup reaps by it).
func TestRuntimeRecordKeptWhileExitUnproven(t *testing.T) {
	f := newFixture(t)
	runtime := func() (*sharedRuntime, string) {
		a := f.create("shared")
		f.hold(a, "w", "c1")
		f.h.mu.Lock()
		defer f.h.mu.Unlock()
		return f.h.runtimes[runtimeKey{"shared", defaultAccount}], a
	}
	rt, _ := runtime()
	real := f.h.stopChild
	f.h.stopChild = func(ctx context.Context, c *proc.Child, l proc.Ladder) proc.Verdict {
		return proc.Verdict{Root: proc.Unverifiable, Tree: proc.Unverifiable}
	}
	f.h.evictRuntime(rt, "test")
	if _, ok := f.runtimeRecord(rt.id); !ok {
		t.Fatal("the record of a runtime whose process is not proven gone was deleted")
	}
	f.h.stopChild = real
	rt.mu.Lock()
	rt.tearing = false // its teardown above gave up: run it again, for real
	rt.mu.Unlock()
	f.h.evictRuntime(rt, "test")
	if _, ok := f.runtimeRecord(rt.id); ok {
		t.Fatal("record kept after the runtime was proven gone")
	}

	rt, _ = runtime()
	f.h.stopChild = func(ctx context.Context, c *proc.Child, l proc.Ladder) proc.Verdict {
		v := real(ctx, c, l)
		v.Tree = proc.Unverifiable // a descendant not proven gone
		return v
	}
	f.h.evictRuntime(rt, "test")
	<-rt.gone
	if _, ok := f.runtimeRecord(rt.id); !ok {
		t.Fatal("the record of a runtime whose tree is not proven gone was deleted")
	}
	f.h.stopChild = real
}

// spawnRuntimeLeftover starts a stubborn echo process tagged as shared
// runtime rtID of this state, as a crashed daemon would have left one,
// and writes its record (bound: the sessions on it).
func (f *fixture) spawnRuntimeLeftover(rtID string, bound ...string) *proc.Child {
	f.t.Helper()
	self, _ := os.Executable()
	c, err := proc.Spawn(proc.Spec{Path: self, Args: []string{"--ignore-sigterm", "--ignore-eof"},
		Env: append(os.Environ(), "HOST_TEST_ECHO=1", "GORACE=atexit_sleep_ms=0",
			"SESSIOND_ECHO_HOME="+filepath.Join(f.dir, "echo")),
		Tags: proc.Tags{RuntimeID: rtID, StateID: f.st.StateID}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Stop(ctx, proc.Ladder{KillTimeout: time.Second})
	})
	id := c.Identity()
	if err := f.st.PutRuntime(store.RuntimeRecord{ID: rtID, Profile: "shared", Account: defaultAccount, Sessions: bound,
		Owner: store.RuntimeOwner{PID: id.PID, StartTicks: id.StartTicks, BootID: id.BootID, SpawnToken: "t"}}); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// noScan makes the startup's /proc tag scan unavailable.
func (f *fixture) noScan() {
	f.h.scanTagged = func(string) ([]proc.Tagged, error) { return nil, proc.ErrCannotEnumerate }
}

func (f *fixture) startup() {
	f.t.Helper()
	if err := f.h.Startup(context.Background(), func(context.Context) error { return nil }); err != nil {
		f.t.Fatal(err)
	}
}

func exited(t *testing.T, c *proc.Child, what string) {
	t.Helper()
	select {
	case <-c.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: pid %d still runs after startup", what, c.Identity().PID)
	}
}

// TestStartupReapsIdleRuntimeByRecord: a crashed run's runtime that no
// lease names (its sessions all released: it was idle, its release clock
// running) is reaped by its record at startup when the tag scan cannot
// run, and the record is deleted; a session a record names whose lease
// is unreadable gets its tail from the record.
func TestStartupReapsIdleRuntimeByRecord(t *testing.T) {
	f := newFixture(t)
	idleRT := f.spawnRuntimeLeftover("r_IDLE")
	s := f.create("shared")
	f.appendEvents(s, event.New(event.ProviderStarted, "", map[string]any{"runtimeId": "r_BOUND"}), openTurn(s))
	if err := f.st.DB.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(store.BucketLeases).Put([]byte(s), []byte(`{"status":"li`))
	}); err != nil {
		t.Fatal(err)
	}
	boundRT := f.spawnRuntimeLeftover("r_BOUND", s)
	f.noScan()
	f.startup()
	exited(t, idleRT, "idle runtime named only by its record")
	exited(t, boundRT, "runtime of a session with a damaged lease")
	for _, id := range []string{"r_IDLE", "r_BOUND"} {
		if r, ok := f.runtimeRecord(id); ok {
			t.Fatalf("record of a reaped runtime kept: %+v", r)
		}
	}
	f.tail(s, event.TurnCompleted, event.ProviderExited, event.SessionEnded)
	if d := data(f.last(s, event.SessionEnded)); d["reason"] != "daemon_restart" {
		t.Fatalf("session.ended %v", d)
	}
}

// TestStartupKeepsRecordOfUnprovenRuntime: a recorded owner that cannot
// be proven gone keeps its record (logged); a later startup that proves
// it gone deletes it.
func TestStartupKeepsRecordOfUnprovenRuntime(t *testing.T) {
	f := newFixture(t)
	c := f.spawnRuntimeLeftover("r_STUCK")
	f.noScan()
	real := f.h.reapProc
	f.h.reapProc = func(_ context.Context, _ *slog.Logger, id proc.Identity, _ proc.Tags, _ proc.Ladder) proc.Verdict {
		return proc.Verdict{Root: proc.Live, Tree: proc.Live, Survivors: []proc.Identity{id}}
	}
	f.startup()
	if _, ok := f.runtimeRecord("r_STUCK"); !ok {
		t.Fatal("the record of a runtime not proven gone was deleted")
	}
	// daemon.stats names it for ctl doctor, with its owner alive.
	if st := f.h.Stats()["staleRuntimeRecords"].([]StaleRuntimeRecord); len(st) != 1 ||
		st[0] != (StaleRuntimeRecord{RuntimeID: "r_STUCK", PID: c.Identity().PID, Owner: "alive"}) {
		t.Fatalf("staleRuntimeRecords %+v", st)
	}
	f.h.reapProc = real
	f.startup()
	exited(t, c, "recorded runtime")
	if _, ok := f.runtimeRecord("r_STUCK"); ok {
		t.Fatal("record kept after its runtime was proven gone")
	}
	if st := f.h.Stats()["staleRuntimeRecords"].([]StaleRuntimeRecord); len(st) != 0 {
		t.Fatalf("staleRuntimeRecords after the record was deleted: %+v", st)
	}
}

// TestStartupDamagedRuntimeRecord: a runtime record that does not decode
// is logged once naming its runtime, startup goes on and reaps by the
// tag scan, then deletes it; when the scan cannot run it is kept.
func TestStartupDamagedRuntimeRecord(t *testing.T) {
	f := newFixture(t)
	logs := &syncBuf{}
	f.h.log = slog.New(slog.NewTextHandler(logs, nil))
	c := f.spawnRuntimeLeftover("r_DAMAGED")
	if err := f.st.DB.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(store.BucketRuntimes).Put([]byte("r_DAMAGED"), []byte(`{"runtimeId":"r_DAM`))
	}); err != nil {
		t.Fatal(err)
	}
	real := f.h.scanTagged
	f.noScan()
	f.startup()
	if n := strings.Count(logs.String(), "runtime record unreadable"); n != 1 || !strings.Contains(logs.String(), "runtime_id=r_DAMAGED") {
		t.Fatalf("logged %d times:\n%s", n, logs.String())
	}
	if _, err := f.st.GetRuntime("r_DAMAGED"); !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("damaged record with no tag scan: %v, want kept", err)
	}
	f.h.scanTagged = real
	f.startup()
	exited(t, c, "runtime of a damaged record, by the tag scan")
	if _, err := f.st.GetRuntime("r_DAMAGED"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("damaged record after the tag scan reaped: %v, want deleted", err)
	}
}

// recordCheckingRuntime is a runtime whose Thread first runs check.
type recordCheckingRuntime struct {
	provider.Runtime
	check func()
}

func (r recordCheckingRuntime) Thread(o provider.Options) provider.Thread {
	r.check()
	return r.Runtime.Thread(o)
}

// TestRuntimeRecordBeforeFirstThread: the record is in the store before
// the runtime's first thread is opened (a crash while the first thread
// starts leaves the runtime named).
func TestRuntimeRecordBeforeFirstThread(t *testing.T) {
	f := newFixture(t)
	prov := f.h.o.Providers["shared"]
	newRT := prov.NewRuntime
	checked := 0
	prov.NewRuntime = func(o provider.RuntimeOptions) provider.Runtime {
		return recordCheckingRuntime{Runtime: newRT(o), check: func() {
			checked++
			recs, err := f.st.ListRuntimes(nil)
			if err != nil || len(recs) != 1 {
				t.Errorf("runtime records when its first thread opens: %+v (%v), want one", recs, err)
			}
		}}
	}
	f.h.o.Providers["shared"] = prov
	a := f.create("shared")
	f.hold(a, "w", "c1")
	if checked != 1 {
		t.Fatalf("threads opened: %d", checked)
	}
	if r, ok := f.runtimeRecord(f.info(a).RuntimeID); !ok || !slices.Equal(r.Sessions, []string{a}) {
		t.Fatalf("record %+v (present %v)", r, ok)
	}
}
