package proc

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The reaper runs for the whole test binary (TestMain). Children started by
// Spawn keep their exit status: the reaper never waits on them.
func TestSubreaperDoesNotStealWaitStatus(t *testing.T) {
	var hs []*helper
	for range 12 {
		hs = append(hs, spawnHelper(t, "exit-code"))
	}
	for i, h := range hs {
		<-h.Exited()
		if e := h.Exit(); e.Code == nil || *e.Code != 7 {
			t.Errorf("child %d: Exit = %+v, want code 7 (status stolen?)", i, e)
		}
	}
}

func TestSubreaperReapsAdoptedOrphans(t *testing.T) {
	before := OrphansReaped()
	h := spawnHelper(t, "orphan")
	v := h.Stop(context.Background(), testLadder)
	if v.Tree != Exited {
		t.Fatalf("tree = %v", v.Tree)
	}
	// the descendant was reparented to us and killed: the reaper must
	// collect its zombie. No signal tells us when; poll with a deadline.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := newStatReader()
		if err != nil {
			t.Fatal(err)
		}
		st, err := r.read(h.grand.PID)
		r.close()
		if errors.Is(err, errNoProc) || st.StartTicks != h.grand.StartTicks {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d never reaped (state %c)", h.grand.PID, st.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The counter moves right after wait4 returns, so the pid can vanish a
	// moment before it does.
	for OrphansReaped() <= before {
		if time.Now().After(deadline) {
			t.Fatal("OrphansReaped did not grow")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := SetSubreaper(nil); !errors.Is(err, ErrReaperRunning) {
		t.Errorf("second SetSubreaper: err = %v, want ErrReaperRunning", err)
	}
}
