package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// floodText is the text of echo's `/numbered /flood n size`.
func floodText(n, size int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%0*d", size, i)
	}
	return b.String()
}

// stderrOf is what a bridge wrote to stderr so far.
func (e *editor) stderrOf() string { return e.cmd.Stderr.(*daemontest.SyncBuffer).String() }

// TestACPBridgeLaggedCatchesUp: a bridge stopped (SIGSTOP) while a turn
// floods reads nothing from the daemon, which lags its subscription
// (agentSession.lagged) and detaches it. Continued, the bridge catches up
// from the journal: the prompt answers end_turn with every delta once, in
// order. (Before: the bridge ignored agentSession.lagged, saw nothing
// more of the session and the prompt never answered.)
func TestACPBridgeLaggedCatchesUp(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	e := startEditor(t, "--socket", d.Socket)
	e.initialize()
	id := e.newSession(t.TempDir())
	dc, rec := follow(t, d.Socket, id)
	const n, size = 768, 8192 // 6 MiB: past the daemon's 4 MiB subscriber queue and the socket's buffers
	ch := e.start("session/prompt", promptParams(id, fmt.Sprintf("/numbered /flood %d %d", n, size)))
	acpWaitEvent(t, rec, event.TurnStarted)
	e.cmd.Process.Signal(syscall.SIGSTOP)
	journalWait(t, dc, id, event.TurnCompleted)
	e.cmd.Process.Signal(syscall.SIGCONT)
	m := e.wait(ch)
	var pr struct {
		StopReason string `json:"stopReason"`
	}
	json.Unmarshal(m.Result, &pr)
	if m.Error != nil || pr.StopReason != "end_turn" {
		t.Fatalf("prompt: %+v %s", m.Error, m.Result)
	}
	if got, want := joined(e.updates(), "agent_message_chunk"), floodText(n, size); got != want {
		t.Fatalf("the editor got %d bytes of the flood, want %d in order (lost or repeated deltas)", len(got), len(want))
	}
	if !strings.Contains(e.stderrOf(), "lagged the subscription: catching up") {
		t.Fatalf("the daemon never lagged the stopped bridge; stderr:\n%s", e.stderrOf())
	}
}

// TestACPBridgeEditorStopsReading: an editor that stops reading stdout
// while a turn floods costs the bridge at most its queue's bound: past
// it the queue is dropped and, once the editor reads again, the bridge
// catches up from the journal; the editor gets every delta once, in
// order. (Before: the bridge queued the whole turn in memory.)
func TestACPBridgeEditorStopsReading(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	e := startEditor(t, "--socket", d.Socket)
	e.initialize()
	id := e.newSession(t.TempDir())
	dc, _ := follow(t, d.Socket, id)
	const n, size = 512, 16384 // 8 MiB: twice the bridge's 4 MiB queue (a bigger turn only makes the test slower under load)
	e.pause.Lock()
	paused := true
	t.Cleanup(func() {
		if paused {
			e.pause.Unlock()
		}
	})
	ch := e.start("session/prompt", promptParams(id, fmt.Sprintf("/numbered /flood %d %d", n, size)))
	journalWait(t, dc, id, event.TurnCompleted)
	hwm := vmHWM(t, e.cmd.Process.Pid)
	paused = false
	e.pause.Unlock()
	m := e.wait(ch)
	if m.Error != nil {
		t.Fatalf("prompt: %+v", m.Error)
	}
	if got, want := joined(e.updates(), "agent_message_chunk"), floodText(n, size); got != want {
		t.Fatalf("the editor got %d bytes of the flood, want %d in order", len(got), len(want))
	}
	t.Logf("bridge peak RSS while the editor did not read a %d MiB turn: %d MiB", n*size>>20, hwm>>20)
	if !strings.Contains(e.stderrOf(), "the editor is not reading") {
		t.Fatalf("the bridge held the whole turn for an editor that did not read (peak RSS %d MiB); stderr:\n%s", hwm>>20, e.stderrOf())
	}
}

// vmHWM is a process's peak resident set, in bytes.
func vmHWM(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// TestACPBridgeDaemonRestart: the daemon dies (SIGKILL) under a bridge
// with a turn running. The bridge starts a daemon again (none runs),
// re-holds its session and catches up from the journal: the running
// prompt answers as the journal ended its turn (cancelled: the restart
// interrupted it), and the editor's session keeps working: the next
// prompt runs in the new daemon. (Before: the prompt failed and every
// later request answered "connection is closed" while the bridge lived on.)
func TestACPBridgeDaemonRestart(t *testing.T) {
	dir := shortDir(t)
	socket := filepath.Join(dir, "run", "sessiond.sock")
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range servesOn(socket) {
			if !exitsWithin(t, pid, syscall.SIGTERM, 30*time.Second) {
				exitsWithin(t, pid, syscall.SIGKILL, 10*time.Second)
			}
		}
	})
	e := startEditor(t, "--socket", socket, "--state-dir", state, "--config", cfg)
	e.initialize()
	id := e.newSession(t.TempDir())
	first := daemonPID(t, socket)
	_, rec := follow(t, socket, id)
	ch := e.start("session/prompt", promptParams(id, "/sleep 60000"))
	acpWaitEvent(t, rec, event.TurnStarted)
	if !exitsWithin(t, first, syscall.SIGKILL, 30*time.Second) {
		t.Fatalf("daemon %d survived SIGKILL", first)
	}
	m := e.wait(ch)
	var pr struct {
		StopReason string `json:"stopReason"`
	}
	json.Unmarshal(m.Result, &pr)
	if m.Error != nil || pr.StopReason != "cancelled" {
		t.Fatalf("the prompt the restart interrupted: %+v %s; stderr:\n%s", m.Error, m.Result, e.stderrOf())
	}
	e.call("session/prompt", promptParams(id, "after the restart"), &pr)
	if got := joined(e.updates(), "agent_message_chunk"); pr.StopReason != "end_turn" || !strings.Contains(got, "after the restart") {
		t.Fatalf("prompt after the restart: %q %q", pr.StopReason, got)
	}
	if second := daemonPID(t, socket); second == first {
		t.Fatalf("still daemon %d", first)
	}
}

func daemonPID(t *testing.T, socket string) int {
	t.Helper()
	c, err := rpc.Dial(context.Background(), socket, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var st rpc.Status
	if err := c.Call(context.Background(), "daemon.status", nil, &st); err != nil {
		t.Fatal(err)
	}
	return st.PID
}

// TestACPBridgeAccount: --account creates the editor's sessions on that
// account of the provider; an account the provider does not have refuses
// session/new naming it, and creates nothing.
func TestACPBridgeAccount(t *testing.T) {
	home := t.TempDir()
	d := daemontest.Start(t, daemontest.Options{Config: fmt.Sprintf("[providers.echo.accounts.work]\nenv = { SESSIOND_ECHO_HOME = %q }\n", home)})
	e := startEditor(t, "--socket", d.Socket, "--account", "work")
	e.initialize()
	var nr struct {
		SessionID string `json:"sessionId"`
	}
	e.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}, &nr)
	c := d.Client(t)
	all, err := c.ListAll(context.Background())
	if err != nil || len(all) != 1 || all[0].Account != "work" || all[0].SessionID != nr.SessionID {
		t.Fatalf("sessions %+v %v", all, err)
	}
	bad := startEditor(t, "--socket", d.Socket, "--account", "nope")
	bad.initialize()
	_, msg := bad.callErr("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}})
	if !strings.Contains(msg, "nope") || !strings.Contains(msg, "work") {
		t.Fatalf("--account nope: %s", msg)
	}
	if all, _ := c.ListAll(context.Background()); len(all) != 1 {
		t.Fatalf("sessions %+v", all)
	}
}

// TestACPBridgeBadFrames: frames a hostile editor sends get JSON-RPC's
// answers (id null) and the bridge goes on: a 100 MiB line, a batch, ids
// that are neither string nor number, a message that is neither request
// nor answer, a method that is no string.
func TestACPBridgeBadFrames(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	e := startEditor(t, "--socket", d.Socket)
	e.initialize()
	e.mu.Lock()
	nullCh := make(chan acpMsg, 16)
	e.resp["null"] = nullCh
	e.mu.Unlock()
	huge := make([]byte, 100<<20)
	for i := range huge {
		huge[i] = 'x'
	}
	for _, c := range []struct {
		line []byte
		want string
	}{
		{huge, "longer than"},
		{[]byte(`[{"jsonrpc":"2.0","id":1,"method":"session/list"}]`), "batches are not supported"},
		{[]byte(`{"jsonrpc":"2.0","id":{"a":1},"method":"session/list"}`), "id must be a string or a number"},
		{[]byte(`{"jsonrpc":"2.0","id":[1],"method":"session/list"}`), "id must be a string or a number"},
		{[]byte(`{"jsonrpc":"2.0","id":true,"method":"session/list"}`), "id must be a string or a number"},
		{[]byte(`{"jsonrpc":"2.0","id":8}`), "neither a request nor an answer"},
		{[]byte(`{"jsonrpc":"2.0","id":9,"method":5}`), "invalid request"},
	} {
		e.writeLine(c.line, false)
		m := e.wait(nullCh)
		if m.Error == nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, c.want) {
			t.Fatalf("%.60s: %+v, want -32600 %q", c.line, m.Error, c.want)
		}
	}
	var lr struct {
		Sessions []any `json:"sessions"`
	}
	e.call("session/list", map[string]any{}, &lr)
}

// TestACPBridgeStoppedHoldEnds: a bridge stopped (SIGSTOP) keeps its
// connection open, so only the ttl of its hold can end it: the hold runs
// out, the release clock fires and the provider child is evicted, with no
// help from the bridge. (Mutation: a hold without ttlMs holds forever.)
func TestACPBridgeStoppedHoldEnds(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "idle_timeout = \"1ms\"\n"})
	e := startEditor(t, "--socket", d.Socket)
	e.initialize()
	id := e.newSession(t.TempDir())
	_, rec := follow(t, d.Socket, id)
	e.cmd.Process.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { e.cmd.Process.Signal(syscall.SIGCONT) })
	acpWaitEvent(t, rec, event.LeaseReleased)
}

// TestACPBridgeDaemonGone: the daemon dies under a bridge and none can be
// started again (its config is refused): after its reconnect bound the
// bridge answers the pending prompt with why and exits 3, instead of
// living on with a dead connection.
func TestACPBridgeDaemonGone(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("no_such_key = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startEditor(t, "--socket", d.Socket, "--state-dir", t.TempDir(), "--config", bad)
	e.initialize()
	id := e.newSession(t.TempDir())
	_, rec := follow(t, d.Socket, id)
	ch := e.start("session/prompt", promptParams(id, "/sleep 60000"))
	acpWaitEvent(t, rec, event.TurnStarted)
	d.Kill()
	m := e.wait(ch)
	if m.Error == nil || m.Error.Code != -32603 || !strings.Contains(m.Error.Message, "could not be reached again") {
		t.Fatalf("the pending prompt: %+v %s", m.Error, m.Result)
	}
	select {
	case <-e.exit:
	case <-time.After(60 * time.Second):
		t.Fatal("the bridge lives on without a daemon")
	}
	if code := e.cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("exit %d, want 3; stderr:\n%s", code, e.stderrOf())
	}
}

// TestACPBridgeStdinEOFWhileReconnecting: the editor goes away (stdin
// EOF) while the bridge is dialling a daemon that is gone: the bridge
// exits instead of waiting for good for a connection that will not come.
// (Before: its last step waited on the reconnect's link, which a
// cancelled reconnect never makes ready; the bridge never exited.)
func TestACPBridgeStdinEOFWhileReconnecting(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("no_such_key = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startEditor(t, "--socket", d.Socket, "--state-dir", t.TempDir(), "--config", bad)
	e.initialize()
	e.newSession(t.TempDir())
	d.Kill()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(e.stderrOf(), "reconnecting to"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the bridge never began to reconnect; stderr:\n%s", e.stderrOf())
		}
	}
	e.in.Close()
	select {
	case <-e.exit:
	case <-time.After(90 * time.Second): // past reconnectWait: not a speed bound
		t.Fatalf("the bridge lives on 90 s after its stdin ended; stderr:\n%s", e.stderrOf())
	}
	if strings.Contains(e.stderrOf(), "could not be reached again") {
		t.Fatalf("the bridge exited only when its reconnect gave up, not at stdin's end; stderr:\n%s", e.stderrOf())
	}
}

// TestACPBridgeLiveUpgrade: a live upgrade closes the bridge's connection
// (after daemon.restarting) while a turn runs on; the bridge reconnects to
// the upgraded daemon, holds again and catches up: the prompt answers
// end_turn with the turn's whole text, as it ended.
func TestACPBridgeLiveUpgrade(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	e := startEditor(t, "--socket", d.Socket)
	e.initialize()
	id := e.newSession(t.TempDir())
	_, rec := follow(t, d.Socket, id)
	ch := e.start("session/prompt", promptParams(id, "/sleep 3000 across the upgrade"))
	acpWaitEvent(t, rec, event.TurnStarted)
	c := d.Client(t, "daemon.upgrade.v1")
	var res api.UpgradeResult
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{}, &res); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, d.Log.String())
	}
	m := e.wait(ch)
	var pr struct {
		StopReason string `json:"stopReason"`
	}
	json.Unmarshal(m.Result, &pr)
	if m.Error != nil || pr.StopReason != "end_turn" {
		t.Fatalf("the prompt across the upgrade: %+v %s; stderr:\n%s", m.Error, m.Result, e.stderrOf())
	}
	if got := joined(e.updates(), "agent_message_chunk"); got != "echo: /sleep 3000 across the upgrade" {
		t.Fatalf("text across the upgrade: %q", got)
	}
	if !strings.Contains(e.stderrOf(), "reconnected") {
		t.Fatalf("the upgrade did not close the bridge's connection; stderr:\n%s", e.stderrOf())
	}
}

// journalWait waits until the session's journal holds an event of type
// typ, reading it page by page (bounded at 2 min). A live subscription
// would do, but a flood can lag the test's own follower too, and a
// lagged subscription is detached: the journal is the truth.
func journalWait(t *testing.T, c *rpc.Client, id, typ string) {
	t.Helper()
	after := uint64(0)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for {
			var r api.ReadResult
			if err := c.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: id, AfterSeq: after, Limit: 4096}, &r); err != nil {
				t.Fatal(err)
			}
			for _, ev := range r.Events {
				if ev.Type == typ {
					return
				}
				after = ev.Seq
			}
			if len(r.Events) == 0 || !r.HasMore {
				break
			}
		}
	}
	t.Fatalf("no %s in the journal within 2 min", typ)
}
