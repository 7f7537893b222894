package proc

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestMarkedStopsOnlyTheThreadsCommands: of three processes tagged as one
// runtime's, Marked finds the one whose environment names the thread (not
// the other thread's, not one of another runtime); StopMarked ends it and
// leaves the others running.
func TestMarkedStopsOnlyTheThreadsCommands(t *testing.T) {
	start := func(env ...string) *exec.Cmd {
		c := exec.Command("sleep", "600")
		c.Env = env
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}
	tags := Tags{RuntimeID: "r_MARKED", StateID: "marked0test"}
	mine := start(append(tags.Env(), "CODEX_THREAD_ID=thr-a")...)
	other := start(append(tags.Env(), "CODEX_THREAD_ID=thr-b")...)
	elsewhere := start(append(Tags{RuntimeID: "r_OTHER", StateID: "marked0test"}.Env(), "CODEX_THREAD_ID=thr-a")...)
	// A session's process whose id is the runtime's id: not the runtime's.
	session := start(append(Tags{SessionID: "r_MARKED", Fence: 1, StateID: "marked0test"}.Env(), "CODEX_THREAD_ID=thr-a")...)
	got, err := Marked(tags, "CODEX_THREAD_ID", "thr-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].PID != mine.Process.Pid {
		t.Fatalf("marked %v, want only %d", got, mine.Process.Pid)
	}
	exited := make(chan error, 1)
	go func() { exited <- mine.Wait() }()
	v := StopMarked(context.Background(), nil, got, Ladder{TermTimeout: 2 * time.Second, KillTimeout: 2 * time.Second})
	if v.Tree != Exited {
		t.Fatalf("verdict %+v", v)
	}
	<-exited
	for _, c := range []*exec.Cmd{other, elsewhere, session} {
		r, err := newStatReader()
		if err != nil {
			t.Fatal(err)
		}
		st, err := r.read(c.Process.Pid)
		r.close()
		if err != nil || st.zombie() {
			t.Fatalf("pid %d was stopped too", c.Process.Pid)
		}
	}
}
