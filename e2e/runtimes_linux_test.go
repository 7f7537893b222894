package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// sessionEvents collects agentSession.event notifications per session.
type sessionEvents struct {
	mu   sync.Mutex
	seen map[string][]event.Event
	ch   chan event.Event
}

func (s *sessionEvents) notify(method string, p json.RawMessage) {
	var n api.EventNotice
	if method != rpc.NotifyEvent || json.Unmarshal(p, &n) != nil {
		return
	}
	s.mu.Lock()
	s.seen[n.Event.SessionID] = append(s.seen[n.Event.SessionID], n.Event)
	s.mu.Unlock()
	s.ch <- n.Event
}

// waitFor waits for an event of typ in session id (seen now or later).
func (s *sessionEvents) waitFor(t *testing.T, id, typ string) event.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		for _, ev := range s.seen[id] {
			if ev.Type == typ {
				s.mu.Unlock()
				return ev
			}
		}
		s.mu.Unlock()
		select {
		case <-s.ch:
		case <-timeout:
			t.Fatalf("session %s: no %s event", id, typ)
		}
	}
}

// TestE2ESharedRuntime: the real daemon with the echo profile on
// processes = "account": five sessions are threads of one provider
// process (one runtime id, one pid, one tagged process), their turns run
// at once and each reply is only in its own journal; closing one leaves
// the others (and a running turn) alone; once every session is released
// the runtime stops after idle_timeout.
func TestE2ESharedRuntime(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "idle_timeout = \"300ms\"\n[providers.echo]\nprocesses = \"account\"\n"})
	evs := &sessionEvents{seen: map[string][]event.Event{}, ch: make(chan event.Event, 4096)}
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{OnNotify: evs.notify,
		Capabilities: []string{api.CapAttach, api.CapStructuredHold, api.CapTurns, api.CapClose, api.CapRuntimes}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 5
	ids := make([]string, n)
	dir := t.TempDir()
	for i := range ids {
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir}, &s); err != nil {
			t.Fatal(err)
		}
		ids[i] = s.SessionID
		var ar api.AttachResult
		if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, &ar); err != nil {
			t.Fatal(err)
		}
		var hr api.HoldResult
		if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "w"}, &hr); err != nil {
			t.Fatal(err)
		}
	}
	var runtimeID string
	var pid int
	for i, id := range ids {
		var si api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.get", map[string]any{"sessionId": id}, &si); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			runtimeID, pid = si.RuntimeID, si.PID
		}
		if !strings.HasPrefix(si.RuntimeID, "r_") || si.RuntimeID != runtimeID || si.PID != pid || si.Account != "default" {
			t.Fatalf("session %d: runtime %q pid %d account %q; session 0: %q pid %d", i, si.RuntimeID, si.PID, si.Account, runtimeID, pid)
		}
	}
	if tagged := daemontest.TaggedProcesses(d.StateID); len(tagged) != 1 || tagged[0] != pid {
		t.Fatalf("tagged provider processes %v, want the one runtime %d", tagged, pid)
	}
	var st rpc.Status
	if err := c.Call(ctx10(t), "daemon.status", struct{}{}, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Runtimes) != 1 || st.Runtimes[0].RuntimeID != runtimeID || st.Runtimes[0].PID != pid ||
		st.Runtimes[0].Sessions != n || st.Runtimes[0].RSSBytes <= 0 || st.Runtimes[0].Provider != "echo" ||
		st.Runtimes[0].PSSBytes <= 0 || st.Runtimes[0].PSSBytes > st.Runtimes[0].RSSBytes {
		t.Fatalf("daemon.status.runtimes %+v", st.Runtimes)
	}
	if code, out, errOut := runCtl(t, d.Socket, t.TempDir(), "show", ids[3]); code != 0 || !strings.Contains(out, runtimeID+" (account default, shared)") {
		t.Fatalf("ctl show: exit %d\n%s%s", code, out, errOut)
	}
	// Session 0 runs a long turn; 1..4 a turn each, all at once.
	var long api.SendResult
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: ids[0], Text: "long /sleep 600000"}, &long); err != nil {
		t.Fatal(err)
	}
	turns := make([]string, n)
	for i := 1; i < n; i++ {
		var sr api.SendResult
		if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: ids[i], Text: fmt.Sprintf("reply %d", i)}, &sr); err != nil {
			t.Fatal(err)
		}
		turns[i] = sr.TurnID
	}
	reply := func(id string) string {
		var rr api.ReadResult
		if err := c.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: id, AfterSeq: 0, Limit: 4096}, &rr); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, ev := range rr.Events {
			if ev.Type == event.MessageDelta {
				var dd event.DeltaData
				_ = json.Unmarshal(ev.Data, &dd)
				b.WriteString(dd.Text)
			}
		}
		return b.String()
	}
	for i := 1; i < n; i++ {
		evs.waitFor(t, ids[i], event.TurnCompleted)
		if got, want := reply(ids[i]), fmt.Sprintf("echo: reply %d", i); got != want {
			t.Errorf("session %d's journal has %q, want only %q", i, got, want)
		}
	}
	// Close session 1: the others go on, the long turn too.
	var cr api.CloseResult
	if err := c.Call(ctx10(t), "agentSession.close", map[string]any{"sessionId": ids[1]}, &cr); err != nil {
		t.Fatal(err)
	}
	evs.waitFor(t, ids[1], event.ProviderDetached)
	var again api.SendResult
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: ids[2], Text: "still here"}, &again); err != nil {
		t.Fatal(err)
	}
	waitTurn := func(id, turn string) event.Event {
		for {
			ev := evs.waitFor(t, id, event.TurnCompleted)
			if ev.TurnID == turn {
				return ev
			}
			evs.mu.Lock() // forget the earlier completion: wait for this turn's
			var rest []event.Event
			for _, e := range evs.seen[id] {
				if !(e.Type == event.TurnCompleted && e.TurnID != turn) {
					rest = append(rest, e)
				}
			}
			evs.seen[id] = rest
			evs.mu.Unlock()
		}
	}
	waitTurn(ids[2], again.TurnID)
	var si0 api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", map[string]any{"sessionId": ids[0]}, &si0); err != nil {
		t.Fatal(err)
	}
	if !si0.TurnRunning || si0.PID != pid {
		t.Fatalf("session 0 after closing session 1: turnRunning %v pid %d", si0.TurnRunning, si0.PID)
	}
	var cancelled map[string]any
	if err := c.Call(ctx10(t), "agentSession.cancel", map[string]any{"sessionId": ids[0]}, &cancelled); err != nil {
		t.Fatal(err)
	}
	if d := waitTurn(ids[0], long.TurnID); !strings.Contains(string(d.Data), `"interrupted"`) {
		t.Fatalf("the long turn ended %s", d.Data)
	}
	// Release everything: each session detaches after idle_timeout, then
	// the runtime's own clock stops the process.
	for _, id := range ids {
		var rr api.ReleaseResult
		if err := c.Call(ctx10(t), "agentSession.release", api.ReleaseParams{SessionID: id, HolderID: "w"}, &rr); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		evs.waitFor(t, id, event.LeaseReleased)
	}
	if !exitsWithin(t, pid, 0, 20*time.Second) {
		t.Fatalf("the runtime %d still runs after every session was released", pid)
	}
	var hr api.HoldResult
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: ids[0], HolderID: "w"}, &hr); err != nil {
		t.Fatal(err)
	}
	var si api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", map[string]any{"sessionId": ids[0]}, &si); err != nil {
		t.Fatal(err)
	}
	if si.RuntimeID == runtimeID || si.PID == pid || hr.PID != si.PID {
		t.Fatalf("a hold after the runtime stopped: runtime %s pid %d (the stopped one: %s pid %d)", si.RuntimeID, si.PID, runtimeID, pid)
	}
}

// TestE2ESharedRuntimeDaemonCrash: kill -9 of the daemon with two
// sessions mid-turn on one runtime: the restarted daemon reaps the
// runtime before it listens (its lease owner, and a tagged process no
// lease names) and gives each session its tail (turn.completed
// {interrupted, daemon_restart}, provider.exited, session.ended,
// lease.released); a hold then resumes each thread in one new runtime.
// The runtime's tree is tagged SESSIOND_RUNTIME_ID and SESSIOND_STATE_ID
// and carries no session's id; a detached descendant of it (/orphan: its
// own session, SIGTERM ignored) whose runtime was killed too is found by
// those tags alone (in fallback mode: no cgroup remembers it) and reaped.
func TestE2ESharedRuntimeDaemonCrash(t *testing.T) {
	for _, mode := range []string{"cgroup", "fallback"} {
		t.Run(mode, func(t *testing.T) { sharedRuntimeDaemonCrash(t, mode) })
	}
}

func sharedRuntimeDaemonCrash(t *testing.T, mode string) {
	cfg := "[providers.echo]\nprocesses = \"account\"\n"
	if mode == "fallback" {
		cfg = fmt.Sprintf("cgroup_root = %q\n", t.TempDir()) + cfg // not a cgroup v2 directory
	}
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	if got := d.Status(t).Supervision; got.Mode != mode {
		t.Fatalf("supervision %s (%s), want %s", got.Mode, got.Reason, mode)
	}
	evs := &sessionEvents{seen: map[string][]event.Event{}, ch: make(chan event.Event, 4096)}
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{OnNotify: evs.notify,
		Capabilities: []string{api.CapAttach, api.CapStructuredHold, api.CapTurns, api.CapRuntimes}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ids := make([]string, 2)
	var pid int
	var runtimeID string
	cgroups := map[string]bool{}
	threads := map[string]string{}
	for i := range ids {
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir}, &s); err != nil {
			t.Fatal(err)
		}
		ids[i] = s.SessionID
		if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, nil); err != nil {
			t.Fatal(err)
		}
		var hr api.HoldResult
		if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "w"}, &hr); err != nil {
			t.Fatal(err)
		}
		pid, threads[s.SessionID] = hr.PID, hr.ThreadID
		var si api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.get", map[string]any{"sessionId": s.SessionID}, &si); err != nil {
			t.Fatal(err)
		}
		runtimeID = si.RuntimeID
		cgroups[si.Cgroup] = true
	}
	// A detached descendant of the runtime, then a long turn on each.
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: ids[0], Text: "/orphan"}, nil); err != nil {
		t.Fatal(err)
	}
	evs.waitFor(t, ids[0], event.TurnCompleted) // the descendant is started before the turn ends
	tagged := daemontest.TaggedProcesses(d.StateID)
	if len(tagged) != 2 || !slices.Contains(tagged, pid) {
		t.Fatalf("tagged processes %v, want the runtime %d and its /orphan descendant", tagged, pid)
	}
	orphan := tagged[0]
	if orphan == pid {
		orphan = tagged[1]
	}
	for _, p := range []int{pid, orphan} {
		env := processEnv(t, p)
		if env[proc.EnvRuntimeID] != runtimeID || env[proc.EnvStateID] != d.StateID {
			t.Fatalf("process %d of runtime %s: %s=%q %s=%q", p, runtimeID, proc.EnvRuntimeID, env[proc.EnvRuntimeID], proc.EnvStateID, env[proc.EnvStateID])
		}
		if sid, ok := env[proc.EnvSessionID]; ok {
			t.Fatalf("process %d of the shared runtime carries %s=%s", p, proc.EnvSessionID, sid)
		}
	}
	// One cgroup per runtime (cgroup mode): both sessions report the
	// runtime's, named after it, and the runtime's tree is in it.
	if mode == "cgroup" {
		var cg string
		for k := range cgroups {
			cg = k
		}
		if len(cgroups) != 1 || filepath.Base(cg) != runtimeID+".f0" ||
			!strings.HasSuffix(cg, cgroupOf(pid)) || cgroupOf(orphan) != cgroupOf(pid) {
			t.Fatalf("session cgroups %v (want one, %s.f0); runtime %d in %q, its descendant %d in %q",
				cgroups, runtimeID, pid, cgroupOf(pid), orphan, cgroupOf(orphan))
		}
	} else if len(cgroups) != 1 || !cgroups[""] {
		t.Fatalf("fallback mode: session cgroups %v", cgroups)
	}
	for _, id := range ids {
		var sr api.SendResult
		if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: id, Text: "long /sleep 600000"}, &sr); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	d.Kill()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !exitsWithin(t, pid, 0, 20*time.Second) {
		t.Fatalf("runtime %d survived SIGKILL", pid)
	}
	if !running(orphan) {
		t.Fatalf("the /orphan descendant %d died with its runtime: the test proves nothing", orphan)
	}
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir, Config: cfg})
	if running(orphan) {
		t.Fatalf("the crashed run's runtime descendant %d (tagged %s=%s) still runs once the restarted daemon listens", orphan, proc.EnvRuntimeID, runtimeID)
	}
	c2 := d2.Client(t)
	var newPID int
	for _, id := range ids {
		var rr api.ReadResult
		if err := c2.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: id, AfterSeq: 0, Limit: 4096}, &rr); err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, ev := range rr.Events {
			types = append(types, ev.Type)
		}
		want := []string{event.TurnCompleted, event.ProviderExited, event.SessionEnded, event.LeaseReleased}
		if len(types) < 4 || strings.Join(types[len(types)-4:], " ") != strings.Join(want, " ") {
			t.Fatalf("session %s's journal after the crash: %v", id, types)
		}
		if tc := rr.Events[len(rr.Events)-4]; !strings.Contains(string(tc.Data), `"daemon_restart"`) {
			t.Fatalf("turn.completed %s", tc.Data)
		}
		var hr api.HoldResult
		if err := c2.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "w"}, &hr); err != nil {
			t.Fatal(err)
		}
		if hr.ThreadID != threads[id] || (newPID != 0 && hr.PID != newPID) || hr.PID == pid {
			t.Fatalf("re-hold of %s: thread %s pid %d (before: %s pid %d; first re-hold pid %d)", id, hr.ThreadID, hr.PID, threads[id], pid, newPID)
		}
		newPID = hr.PID
	}
}

// processEnv is pid's environment as a map.
func processEnv(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}
