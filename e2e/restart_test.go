package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// logMsgs returns the daemon's log lines as (msg, step) in order.
func logMsgs(t *testing.T, log string) (msgs, steps []string) {
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Msg  string `json:"msg"`
			Step string `json:"step"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		msgs = append(msgs, rec.Msg)
		if rec.Msg == "startup step" {
			steps = append(steps, rec.Step)
		}
	}
	return msgs, steps
}

// waitLog polls the daemon's log for a line containing s (no other signal
// for a line another process writes).
func waitLog(t *testing.T, d *daemontest.Daemon, s string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(d.Log.String(), s); {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", s, d.Log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestE2ERestartReapsBeforeListen: a SIGKILLed daemon leaves a stubborn
// child mid-turn; the next start logs reap-orphans, close-open-turns,
// restore, then listen, and the first client to connect already sees the
// daemon_restart tail, with no tagged process left.
func TestE2ERestartReapsBeforeListen(t *testing.T) {
	cfg := stubbornConfig(t)
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "stubborn", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.send", map[string]any{"sessionId": s.SessionID, "text": "/orphan /sleep 60000"}, nil); err != nil {
		t.Fatal(err)
	}
	// The kill must find the detached descendant already running.
	for deadline := time.Now().Add(10 * time.Second); len(daemontest.TaggedProcesses(d.StateID)) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("no detached descendant: %v", daemontest.TaggedProcesses(d.StateID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.Kill()
	d2 := daemontest.Start(t, daemontest.Options{Config: cfg, StateDir: d.StateDir})
	if pids := daemontest.TaggedProcesses(d2.StateID); len(pids) != 0 {
		t.Fatalf("tagged processes alive once the restarted daemon listens: %v", pids)
	}
	var r api.ReadResult
	if err := d2.Client(t).Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: s.SessionID, Limit: 4096}, &r); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range r.Events[len(r.Events)-4:] {
		types = append(types, ev.Type)
	}
	want := []string{event.TurnCompleted, event.ProviderExited, event.SessionEnded, event.LeaseReleased}
	if !slices.Equal(types, want) || !strings.Contains(string(r.Events[len(r.Events)-4].Data), event.ReasonDaemonRestart) {
		t.Fatalf("tail after restart %v, want %v (daemon_restart)", types, want)
	}
	msgs, steps := logMsgs(t, d2.Log.String())
	if !slices.Equal(steps, []string{"reap-orphans", "close-open-turns", "restore", "listen"}) {
		t.Fatalf("startup steps %v", steps)
	}
	// in cgroup mode the crashed run's cgroup is emptied whole ("stale
	// cgroup reaped"); in fallback each orphan is laddered ("… orphan reaped")
	reaped := slices.IndexFunc(msgs, func(m string) bool { return strings.HasSuffix(m, "orphan reaped") || m == "stale cgroup reaped" })
	if i, j := reaped, slices.Index(msgs, "listening"); i < 0 || j < i {
		t.Fatalf("the reap is not logged before listening: %v", msgs)
	}
}

// TestE2ESecondSignalDuringShutdown: a stubborn child makes the shutdown
// climb the whole ladder; a second SIGTERM meanwhile gets a log line, the
// evictions finish, the daemon exits 0 and nothing tagged is left.
func TestE2ESecondSignalDuringShutdown(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: stubbornConfig(t)})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "stubborn", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	d.Cmd.Process.Signal(syscall.SIGTERM)
	waitLog(t, d, `"msg":"signal received, shutting down"`)
	d.Cmd.Process.Signal(syscall.SIGTERM)
	if code := d.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after two SIGTERMs:\n%s", code, d.Log.String())
	}
	msgs, _ := logMsgs(t, d.Log.String())
	second := slices.IndexFunc(msgs, func(m string) bool { return strings.HasPrefix(m, "signal received while shutting down") })
	if second < 0 || second > slices.Index(msgs, "stopped") {
		t.Fatalf("second signal not answered with a log line before stopped: %v", msgs)
	}
	if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
		t.Fatalf("tagged processes left: %v", pids)
	}
}
