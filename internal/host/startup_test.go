package host

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/proc"
)

// spawnLeftover starts a stubborn echo provider (ignores SIGTERM and stdin
// EOF) tagged for session id at fence, as a previous daemon would have
// left it. Startup's reap must stop it.
func (f *fixture) spawnLeftover(id string, fence uint64) *proc.Child {
	f.t.Helper()
	self, _ := os.Executable()
	c, err := proc.Spawn(proc.Spec{Path: self, Args: []string{"--ignore-sigterm", "--ignore-eof"},
		Env: append(os.Environ(), "HOST_TEST_ECHO=1", "GORACE=atexit_sleep_ms=0",
			"SESSIOND_ECHO_HOME="+filepath.Join(f.dir, "echo")),
		Tags: proc.Tags{SessionID: id, Fence: fence, StateID: f.st.StateID}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Stop(ctx, proc.Ladder{KillTimeout: time.Second})
	})
	return c
}

// leaseTo acquires the session's lease as a dead daemon would have,
// owned by c (nil: reserved, no owner yet).
func (f *fixture) leaseTo(id string, c *proc.Child) uint64 {
	f.t.Helper()
	g, err := f.h.leases.Acquire(id)
	if err != nil {
		f.t.Fatal(err)
	}
	if c != nil {
		ci := c.Identity()
		o := lease.Owner{PID: ci.PID, StartTicks: ci.StartTicks, BootID: ci.BootID, SpawnToken: g.SpawnToken}
		if err := f.h.leases.Commit(id, g.Fence, g.SpawnToken, o); err != nil {
			f.t.Fatal(err)
		}
	}
	return g.Fence
}

func (f *fixture) appendEvents(id string, ds ...event.Draft) {
	f.t.Helper()
	if _, err := f.j.Append(context.Background(), id, ds...); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) journalTypes(id string) []string {
	f.t.Helper()
	evs, _, _, err := f.j.Read(id, 0, 4096)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		s := ev.Type
		var d map[string]any
		if json.Unmarshal(ev.Data, &d) == nil {
			if r, ok := d["reason"]; ok {
				s += ":" + r.(string)
			}
		}
		out = append(out, s)
	}
	return out
}

func openTurn(id string) event.Draft {
	return event.New(event.TurnStarted, "t_"+id, map[string]any{"turnId": "t_" + id, "text": "hi"})
}

// TestStartupBringsStateToRestBeforeListen: every shape a killed daemon
// leaves is at rest by the time listen runs — no tagged process, every
// lease released, no open turn — with the documented tail journaled.
func TestStartupBringsStateToRestBeforeListen(t *testing.T) {
	f := newFixture(t)
	ended := event.New(event.SessionEnded, "", map[string]any{"reason": "closed"})
	cases := []struct {
		name  string
		setup func(id string) // leaves a dead daemon's state for session id
		want  []string        // journal types after session.created
		ev    lease.EvidenceKind
	}{
		{"live owner mid-turn and a detached descendant", func(id string) {
			c := f.spawnLeftover(id, 0) // the owner; fence filled below
			fence := f.leaseTo(id, c)
			f.spawnLeftover(id, fence)   // a descendant with the same tags
			f.spawnLeftover(id, fence-1) // one an older incarnation left
			f.appendEvents(id, openTurn(id))
		}, []string{"turn.started", "turn.completed:daemon_restart", "provider.exited", "session.ended:daemon_restart", "lease.released"},
			lease.EvidenceExitObserved},
		{"dead owner, no turn", func(id string) {
			c := f.spawnLeftover(id, 0)
			f.leaseTo(id, c)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c.Stop(ctx, proc.Ladder{KillTimeout: time.Second})
		}, []string{"provider.exited", "session.ended:daemon_restart", "lease.released"}, lease.EvidencePidAbsent},
		{"reserved lease, killed while starting", func(id string) { f.leaseTo(id, nil) },
			[]string{"provider.exited", "session.ended:daemon_restart", "lease.released"}, lease.EvidencePidAbsent},
		{"open turn, lease released", func(id string) {
			f.appendEvents(id, openTurn(id))
		}, []string{"turn.started", "turn.completed:daemon_restart", "session.ended:daemon_restart"}, ""},
		{"killed between releasing the lease and journaling it", func(id string) {
			fence := f.leaseTo(id, nil)
			if _, err := f.h.leases.Release(id, fence, nil); err != nil {
				t.Fatal(err)
			}
			f.appendEvents(id, ended)
		}, []string{"session.ended:closed", "lease.released"}, ""},
		{"stored and at rest", func(string) {}, nil, ""},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = f.create("echo")
		c.setup(ids[i])
	}
	// A tagged process no lease names (a session deleted meanwhile).
	f.spawnLeftover("s_nolease_orphan", 3)
	if left, _ := proc.ScanTagged(f.st.StateID); len(left) != 4 {
		t.Fatalf("setup: %d tagged processes, want 4", len(left))
	}

	listened := false
	err := f.h.Startup(context.Background(), func(context.Context) error {
		listened = true
		if left, err := proc.ScanTagged(f.st.StateID); err != nil || len(left) != 0 {
			t.Errorf("listen before the reap was done: tagged %v (err %v)", left, err)
		}
		for i, c := range cases {
			if st := f.j.State(ids[i]); st.OpenTurn != "" {
				t.Errorf("%s: listen with an open turn %s", c.name, st.OpenTurn)
			}
		}
		return nil
	})
	if err != nil || !listened {
		t.Fatalf("startup: %v (listened %v)", err, listened)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := f.journalTypes(ids[i])
			want := append([]string{"session.created"}, c.want...)
			if !slices.Equal(got, want) {
				t.Errorf("journal\n got %v\nwant %v", got, want)
			}
			rec, err := f.h.leases.Get(ids[i])
			if err != nil || rec.Status != lease.Released {
				t.Errorf("lease %+v %v, want released", rec, err)
			}
			if c.ev != "" && (rec.DeathEvidence == nil || rec.DeathEvidence.Kind != c.ev) {
				t.Errorf("death evidence %+v, want %s", rec.DeathEvidence, c.ev)
			}
		})
	}
	// Idempotent: a second startup (a crash during the first) adds nothing.
	before := make([][]string, len(ids))
	for i, id := range ids {
		before[i] = f.journalTypes(id)
	}
	if err := f.h.Startup(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if got := f.journalTypes(id); !slices.Equal(got, before[i]) {
			t.Errorf("%s: second startup changed the journal: %v -> %v", cases[i].name, before[i], got)
		}
	}
}

// TestStartupReapsTaggedSurvivorOfReleasedLease: a tagged process of a
// session whose lease was released (a survivor the previous daemon's
// cleanup still owed a re-ladder) is reaped before listen too.
func TestStartupReapsTaggedSurvivorOfReleasedLease(t *testing.T) {
	f := newFixture(t)
	id := f.create("echo")
	c := f.spawnLeftover(id, 1)
	fence := f.leaseTo(id, c)
	if _, err := f.h.leases.Release(id, fence, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.h.Startup(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("the tagged survivor of a released lease is still running after startup (pid %d)", c.Identity().PID)
	}
}
