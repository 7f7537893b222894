package proc

import (
	"context"
	"strings"
	"testing"
	"time"
)

var testLadder = Ladder{Grace: 100 * time.Millisecond, TermTimeout: 300 * time.Millisecond, KillTimeout: time.Second}

func TestStopLadder(t *testing.T) {
	tests := []struct {
		mode          string
		closeFirst    bool // close stdin and wait for the root before Stop
		wantSignalled bool
		wantCode      int // -1: no code
		wantSignal    string
		wantTerm      bool // the root saw SIGTERM first
	}{
		{mode: "cooperative", wantCode: 0},
		{mode: "ignore-sigterm", wantSignalled: true, wantCode: -1, wantSignal: "SIGKILL", wantTerm: true},
		{mode: "sleep", wantSignalled: true, wantCode: -1, wantSignal: "SIGTERM"},
		// the root exits on EOF; the tagged, detached descendant ignoring
		// SIGTERM still gets TERM then KILL
		{mode: "orphan", wantSignalled: true, wantCode: 0},
		// env scrubbed and detached: only the descendant walk recorded
		// before stdin was closed finds it
		{mode: "orphan-scrubbed", wantSignalled: true, wantCode: 0},
		// env scrubbed, in the root's group, root already gone (descendant
		// reparented to us): only the group finds it
		{mode: "orphan-group", closeFirst: true, wantSignalled: true, wantCode: 0},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			h := spawnHelper(t, tt.mode)
			if tt.closeFirst {
				h.Stdin().Close()
				<-h.Exited()
			}
			v := h.Stop(context.Background(), testLadder)
			if v.Root != Exited || v.Tree != Exited {
				t.Fatalf("verdict root=%v tree=%v survivors=%v, want exited/exited", v.Root, v.Tree, v.Survivors)
			}
			if v.Signalled != tt.wantSignalled {
				t.Errorf("Signalled = %v, want %v", v.Signalled, tt.wantSignalled)
			}
			switch {
			case tt.wantCode >= 0 && (v.Code == nil || *v.Code != tt.wantCode):
				t.Errorf("Code = %v, want %d", v.Code, tt.wantCode)
			case tt.wantCode < 0 && v.Code != nil:
				t.Errorf("Code = %d, want none", *v.Code)
			}
			if v.Signal != tt.wantSignal {
				t.Errorf("Signal = %q, want %q", v.Signal, tt.wantSignal)
			}
			if got := strings.Contains(h.StderrTail(), "got SIGTERM"); got != tt.wantTerm {
				t.Errorf("root saw SIGTERM = %v, want %v (stderr %q)", got, tt.wantTerm, h.StderrTail())
			}
			if h.grand.PID > 0 && Probe(h.grand) == Alive {
				t.Errorf("descendant %d still alive after an exited verdict", h.grand.PID)
			}
		})
	}
}

func TestExitDuringStart(t *testing.T) {
	h := spawnHelper(t, "exit-at-start")
	<-h.Exited()
	e := h.Exit()
	if e.Code == nil || *e.Code != 3 || e.Signal != "" {
		t.Fatalf("Exit = %+v, want code 3", e)
	}
	if !strings.Contains(h.StderrTail(), "provider refused to start") {
		t.Errorf("StderrTail = %q", h.StderrTail())
	}
	v := h.Stop(context.Background(), testLadder)
	if v.Root != Exited || v.Tree != Exited || v.Signalled {
		t.Errorf("Stop after exit = %+v, want exited/exited and no signal", v)
	}
}

func TestSpawnFails(t *testing.T) {
	_, err := Spawn(Spec{Path: t.TempDir() + "/missing", Tags: testTags(t)})
	if err == nil {
		t.Fatal("Spawn of a missing binary succeeded")
	}
	if !errorsIs(err, ErrSpawn) {
		t.Errorf("err = %v, want ErrSpawn", err)
	}
}

func TestSpawnEnvTagsAndGroup(t *testing.T) {
	h := spawnHelper(t, "sleep")
	pid := h.Identity().PID
	env := taggedPIDs(EnvSessionID + "=" + h.tags.SessionID)
	if len(env) != 1 || env[0] != pid {
		t.Errorf("tagged pids = %v, want [%d]", env, pid)
	}
	for _, kv := range []string{EnvFence + "=1", EnvStateID + "=" + testStateID} {
		if !containsInt(taggedPIDs(kv), pid) {
			t.Errorf("child does not carry %s", kv)
		}
	}
	r, _ := newStatReader()
	defer r.close()
	st, err := r.read(pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.PGID != pid {
		t.Errorf("pgid = %d, want its own group %d", st.PGID, pid)
	}
	if Probe(h.Identity()) != Alive {
		t.Errorf("Probe(child) = %v", Probe(h.Identity()))
	}
}

func TestStopCancelledSendsNothingMore(t *testing.T) {
	h := spawnHelper(t, "ignore-sigterm")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v := h.Stop(ctx, testLadder)
	if v.Root != Live || v.Tree != Live || v.Signalled {
		t.Fatalf("verdict = %+v, want live/live with no signal", v)
	}
	if len(v.Survivors) != 1 || v.Survivors[0] != h.Identity() {
		t.Errorf("Survivors = %v, want the root", v.Survivors)
	}
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// What a child writes while exiting stays readable after Wait: Spawn's
// stdout is not closed under the reader when the child exits.
func TestStdoutReadableAfterExit(t *testing.T) {
	h := spawnHelper(t, "cooperative")
	v := h.Stop(context.Background(), testLadder)
	if v.Root != Exited {
		t.Fatalf("root = %v", v.Root)
	}
	line, err := h.out.ReadString('\n')
	if err != nil || line != "bye\n" {
		t.Errorf("after exit read %q, %v; want \"bye\\n\"", line, err)
	}
}

// A descendant holding the child's stderr open does not hold up Exited
// (bounded linger), and the tail still has what the child wrote.
func TestExitedNotHeldByStderrHolder(t *testing.T) {
	h := spawnHelper(t, "stderr-holder")
	h.Stdin().Close()
	select {
	case <-h.Exited():
	case <-time.After(10 * time.Second): // a failure bound, not a wait
		t.Fatal("Exited never closed while a descendant held stderr")
	}
	if e := h.Exit(); e.Code == nil || *e.Code != 0 {
		t.Errorf("Exit = %+v", e)
	}
	if Probe(h.grand) != Alive {
		t.Fatal("the stderr holder died with its parent")
	}
	v := h.Stop(context.Background(), testLadder)
	if v.Tree != Exited || !v.Signalled {
		t.Errorf("verdict %+v, want the holder signalled and the tree exited", v)
	}
}
