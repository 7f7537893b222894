package daemontest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/sysx"
)

// TestMain doubles as a helper: DAEMONTEST_HELPER=stdin lives until its
// stdin closes (so it dies with the test).
func TestMain(m *testing.M) {
	if os.Getenv("DAEMONTEST_HELPER") == "stdin" {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestTaggedProcesses(t *testing.T) {
	id := fmt.Sprintf("dt%d", time.Now().UnixNano())
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DAEMONTEST_HELPER=stdin", "SESSIOND_STATE_ID="+id, "GORACE=atexit_sleep_ms=0")
	sysx.Tie(cmd, syscall.SIGKILL)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if got := TaggedProcesses(id); !slices.Contains(got, cmd.Process.Pid) {
		t.Fatalf("TaggedProcesses(%s) = %v, want %d", id, got, cmd.Process.Pid)
	}
	if got := TaggedProcesses(id + "x"); len(got) != 0 {
		t.Fatalf("another state id matched: %v", got)
	}
	stdin.Close()
	cmd.Wait()
	if got := TaggedProcesses(id); len(got) != 0 {
		t.Fatalf("after exit: %v", got)
	}
}

func TestStartStop(t *testing.T) {
	d := Start(t, Options{Config: "idle_timeout = \"5s\"\n"})
	st := d.Status(t)
	if st.PID != d.Cmd.Process.Pid || st.StateID != d.StateID || st.StateDir != d.StateDir || len(TaggedProcesses(d.StateDir)) != 0 {
		t.Fatalf("status %+v, daemon %+v", st, d)
	}
	d.Stop()
	// a restart on the same state dir keeps its state id
	d2 := Start(t, Options{StateDir: d.StateDir})
	if d2.StateID != d.StateID {
		t.Fatalf("state id changed across restart: %s -> %s", d.StateID, d2.StateID)
	}
	d2.Kill()
}
