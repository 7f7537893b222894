package proc

import (
	"context"
	"syscall"
	"testing"
)

func TestReapNeverSignalsAReusedPid(t *testing.T) {
	h := spawnHelper(t, "sleep")
	// the recorded identity has the right pid but another start time: the
	// process now at that pid is somebody else's
	old := h.Identity()
	old.StartTicks--
	if st := Probe(old); st != IdentityMismatch {
		t.Fatalf("Probe = %v, want identity-mismatch", st)
	}
	v := Reap(context.Background(), nil, old, Tags{SessionID: "other-session", Fence: 1, StateID: testStateID}, testLadder)
	if v.Signalled || v.Root != Exited || v.Tree != Exited {
		t.Errorf("verdict = %+v, want exited/exited with no signal", v)
	}
	if st := Probe(h.Identity()); st != Alive {
		t.Fatalf("the process at the reused pid was hit: %v", st)
	}
	select {
	case <-h.Exited():
		t.Fatalf("the process at the reused pid exited: %+v", h.Exit())
	default:
	}
}

func TestReapKillsRecordedOwnerAndTagged(t *testing.T) {
	tests := []struct {
		name string
		mode string
		kill bool // the root is gone already; only its tagged descendant is left
	}{
		{"live owner ignoring SIGTERM", "ignore-sigterm", false},
		{"owner dead, tagged descendant lives", "orphan", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := spawnHelper(t, tt.mode)
			if tt.kill {
				h.Stdin().Close()
				<-h.Exited()
			}
			v := Reap(context.Background(), nil, h.Identity(), h.tags, testLadder)
			if v.Root != Exited || v.Tree != Exited || !v.Signalled {
				t.Fatalf("verdict = %+v, want exited/exited, signalled", v)
			}
			if v.Code != nil || v.Signal != "" {
				t.Errorf("Reap claims an exit status it cannot know: %+v", v)
			}
			<-h.Exited()
			if h.grand.PID > 0 && Probe(h.grand) == Alive {
				t.Errorf("tagged descendant survived")
			}
		})
	}
}

func TestScanTaggedFindsDetachedDescendants(t *testing.T) {
	h := spawnHelper(t, "orphan")
	other := spawnHelper(t, "sleep")
	found, err := ScanTagged(testStateID)
	if err != nil {
		t.Fatal(err)
	}
	bySID := map[int]Tagged{}
	for _, f := range found {
		bySID[f.PID] = f
	}
	for _, want := range []struct {
		id   Identity
		tags Tags
	}{{h.Identity(), h.tags}, {h.grand, h.tags}, {other.Identity(), other.tags}} {
		got, ok := bySID[want.id.PID]
		if !ok {
			t.Errorf("pid %d not found in %v", want.id.PID, found)
			continue
		}
		if got.Identity != want.id || got.SessionID != want.tags.SessionID || got.Fence != want.tags.Fence {
			t.Errorf("found %+v, want %+v with %+v", got, want.id, want.tags)
		}
	}
	none, err := ScanTagged("no-such-state-dir")
	if err != nil || len(none) != 0 {
		t.Errorf("ScanTagged(other state) = %v, %v", none, err)
	}
	v := h.Stop(context.Background(), testLadder)
	if v.Tree != Exited {
		t.Errorf("tree = %v", v.Tree)
	}
}

// The last line of defence: a signal to an identity whose pid now holds
// another process is never sent, even when a stale identity reaches it.
func TestSignalRechecksIdentity(t *testing.T) {
	h := spawnHelper(t, "sleep")
	stale := h.Identity()
	stale.StartTicks++
	x := newRun(nil, nil, Identity{}, Tags{})
	defer x.close()
	x.signalOne(stale, syscall.SIGKILL)
	if x.signalled {
		t.Error("signalOne reports a signal sent to a stale identity")
	}
	if _, st := openVerified(x.r, stale); st != IdentityMismatch {
		t.Errorf("openVerified(stale) = %v, want identity-mismatch", st)
	}
	if st := Probe(h.Identity()); st != Alive {
		t.Fatalf("the process at the reused pid was hit: %v", st)
	}
}
