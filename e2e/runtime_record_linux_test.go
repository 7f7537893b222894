package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ECrashIdleRuntimeRecord: a shared runtime no session is on (its
// release clock running, no lease naming it) outlives a SIGKILL of the
// daemon; its record names it: ctl doctor reports the record with its
// owner alive and the kill line, the restarted daemon reaps it and
// deletes the record, and a clean stop leaves no record.
func TestE2ECrashIdleRuntimeRecord(t *testing.T) {
	cfg := fmt.Sprintf("idle_timeout = \"1h\"\n[ladder]\ngrace = \"100ms\"\nterm_timeout = \"2s\"\nkill_timeout = \"2s\"\n"+
		"[providers.echo]\ncommand = [%q, \"provider\", \"echo\", \"--ignore-eof\"]\nprocesses = \"account\"\n", daemontest.Binary(t))
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	c := d.Client(t, api.CapAttach, api.CapStructuredHold, api.CapTurns, api.CapClose, api.CapRuntimes, api.CapAdmin)
	id, pid := liveSession(t, c)
	var cr api.CloseResult
	if err := c.Call(ctx10(t), "agentSession.close", map[string]any{"sessionId": id}, &cr); err != nil {
		t.Fatal(err)
	}
	waitJournal(t, func() *rpc.Client { return c }, id, "lease.released", has(event.LeaseReleased))
	var st rpc.Status
	if err := c.Call(ctx10(t), "daemon.status", struct{}{}, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Runtimes) != 1 || st.Runtimes[0].PID != pid || st.Runtimes[0].Sessions != 0 {
		t.Fatalf("runtimes before the kill: %+v", st.Runtimes)
	}
	rtID := st.Runtimes[0].RuntimeID
	c.Close()
	d.Kill()
	if !running(pid) {
		t.Fatalf("the idle runtime %d died with the daemon: the test proves nothing", pid)
	}
	code, rep, out := doctorJSON(t, d.Socket, "--state-dir", d.StateDir)
	ps := problemsOf(rep, "runtime-records")
	if code != 1 || len(ps) != 1 || !strings.Contains(ps[0].What, rtID) || !strings.Contains(ps[0].What, "is alive") ||
		!strings.Contains(ps[0].Fix, fmt.Sprintf("kill %d", pid)) {
		t.Fatalf("doctor after the kill: exit %d, runtime-records %+v\n%s", code, ps, out)
	}
	d2 := daemontest.Start(t, daemontest.Options{Config: cfg, StateDir: d.StateDir})
	if !exitsWithin(t, pid, 0, 30*time.Second) {
		t.Fatalf("the crashed run's idle runtime %d still runs after the restart", pid)
	}
	d2.Stop()
	if recs := runtimeRecords(t, d.StateDir); len(recs) != 0 {
		t.Fatalf("runtime records after the restart reaped and a clean stop: %+v", recs)
	}
	code, rep, out = doctorJSON(t, d.Socket, "--state-dir", d.StateDir)
	if code != 0 || len(problemsOf(rep, "runtime-records")) != 0 {
		t.Fatalf("doctor on a cleanly stopped state dir: exit %d\n%s", code, out)
	}
}
