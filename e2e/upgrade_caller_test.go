package e2e

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/frametest"
)

// TestE2EUpgradeCallerStopsReading: the caller of daemon.upgrade is also
// attached to a session whose flood filled its socket, and it has stopped
// reading. The connection is busy being written to when the daemon
// re-executes: it is closed and not handed over (an answer after a cut
// frame, or a write to a full socket, would hold the new image), so the
// new image completes the upgrade, serves, and stops on SIGTERM.
func TestE2EUpgradeCallerStopsReading(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{Config: "write_timeout = \"120s\"\n"})
	c := d.Client(t)
	id, pid := liveSession(t, c)
	r := dialRaw(t, d.Socket, false)
	for i, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.attach.v1","agent-session.structured.hold.v1","agent-session.turns.v1","daemon.upgrade.v1"]}}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"agentSession.attach","params":{"sessionId":%q}}`, id),
	} {
		r.send(m)
		if resp := r.recv(); resp["result"] == nil {
			t.Fatalf("#%d %s: %v", i, m, resp)
		}
	}
	// Several MiB for a connection that never reads again: its writer
	// blocks on the full socket.
	send(t, c, id, "/flood 40000 100")
	waitJournal(t, func() *rpc.Client { return c }, id, "turn.completed", turnDone)
	r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"UP","method":"daemon.upgrade","params":{"binary":%q}}`, v2))
	waitLog(t, d, `"msg":"upgrade complete"`)
	c2 := d.Client(t)
	var s api.SessionInfo
	if err := c2.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil || s.PID != pid {
		t.Fatalf("session after the upgrade: pid %d (want %d) %v", s.PID, pid, err)
	}
	if st := d.Status(t); st.Version != upgradeVersion {
		t.Fatalf("version after the upgrade: %s", st.Version)
	}
	c.Close()
	c2.Close()
	d.Stop()
}

// TestE2EUpgradeCallerDescriptorChecked: the new image answers the caller
// only on a connected unix stream socket. Here the handoff names the
// store's descriptor as the caller's (a wrapper rewrites it before the
// real binary runs): it is left alone, so nothing is written into the
// store and its flock is still held; the daemon carries on.
func TestE2EUpgradeCallerDescriptorChecked(t *testing.T) {
	next := script(t, `case "$1" in version) exec "$REAL" "$@";; esac
S=$(sed -E 's/.*"storeFd":([0-9]+).*/\1/' "$SESSIOND_HANDOFF")
sed -i -E 's/"caller":\{"fd":[0-9]+/"caller":{"fd":'"$S"'/' "$SESSIOND_HANDOFF"
exec "$REAL" "$@"`)
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	id, _ := liveSession(t, c)
	_ = c.Call(ctxN(t, 5*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: next}, nil) // never answered
	waitLog(t, d, `"msg":"upgrade complete"`)
	if !strings.Contains(d.Log.String(), "the caller's descriptor is not answered") {
		t.Fatalf("no line about the caller's descriptor:\n%s", d.Log.String())
	}
	if exec.Command("flock", "-n", "-x", filepath.Join(d.StateDir, "sessiond.db"), "true").Run() == nil {
		t.Fatal("the store's flock was let go: its descriptor was used as the caller's")
	}
	c2 := d.Client(t)
	send(t, c2, id, "after")
	evs := waitJournal(t, func() *rpc.Client { return c2 }, id, "turn.completed", turnDone)
	if got := deltaText(t, evs); got != "echo: after" {
		t.Fatalf("after the upgrade the turn answered %q", got)
	}
}

// TestE2EUpgradeShutdownDuringQuiesce: SIGTERM while a live upgrade waits
// for a call in flight (a hold whose child starts slowly): the upgrade is
// abandoned before the exec (upgrade_refused {cause: shutting_down}) and the
// shutdown runs whole: the daemon exits 0 and no child is left.
func TestE2EUpgradeShutdownDuringQuiesce(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	cfg := fmt.Sprintf("step_timeout = \"60s\"\n[providers.slow]\ncommand = [%q, \"provider\", \"echo\", \"--slow-start\", \"8000\"]\n",
		daemontest.Binary(t))
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "slow", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	hc := d.Client(t)
	go func() {
		held <- hc.Call(ctxN(t, 60*time.Second), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil)
	}()
	for deadline := time.Now().Add(20 * time.Second); len(daemontest.TaggedProcesses(d.StateID)) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the slow child never started")
		}
		time.Sleep(10 * time.Millisecond) // another process appearing: nothing to wait on
	}
	upgraded := make(chan error, 1)
	go func() {
		upgraded <- c.Call(ctxN(t, 90*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, nil)
	}()
	waitLog(t, d, `"msg":"upgrade started"`)
	d.Cmd.Process.Signal(syscall.SIGTERM)
	if code := d.Wait(90 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM during the upgrade:\n%s", code, d.Log.String())
	}
	err := <-upgraded
	<-held
	if !strings.Contains(d.Log.String(), "re-executing in place") { // else the signal came after the exec: the new image stopped
		var re *rpc.Error
		if !errors.As(err, &re) || re.Reason != "upgrade_refused" || re.Data["cause"] != "shutting_down" {
			t.Fatalf("the upgrade interrupted by a shutdown: %v (%v)\n%s", err, dataOf(re), d.Log.String())
		}
	}
	if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
		t.Fatalf("children left after the shutdown: %v", pids)
	}
}

// TestE2EUpgradeCallerServedOn: after a live upgrade the caller's
// connection is the new image's, in either framing: the answer is not
// followed by a close (a client that disposes of its connection on close
// would lose it); a request pipelined right behind daemon.upgrade (read
// by the old image, not parsed) is answered by the new image; the
// connection is initialized with the capabilities it negotiated (a hold
// works, a second initialize is already_initialized).
func TestE2EUpgradeCallerServedOn(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{})
	id, _ := liveSession(t, d.Client(t))
	for _, header := range []bool{false, true} {
		r := dialRaw(t, d.Socket, header)
		r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.structured.hold.v1","daemon.upgrade.v1"]}}`)
		if resp := r.recv(); resp["result"] == nil {
			t.Fatalf("initialize: %v", resp)
		}
		r.write(frametest.Frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":"UP","method":"daemon.upgrade","params":{"binary":%q}}`, v2), header) +
			frametest.Frame(`{"jsonrpc":"2.0","id":3,"method":"daemon.status"}`, header))
		got := map[string]map[string]any{}
		for len(got) < 2 {
			m := r.recv()
			if m["method"] == rpc.NotifyRestarting {
				continue
			}
			got[fmt.Sprint(m["id"])] = m
		}
		up, _ := got["UP"]["result"].(map[string]any)
		st, _ := got["3"]["result"].(map[string]any)
		if up == nil || up["toVersion"] != upgradeVersion || st == nil || st["version"] != upgradeVersion {
			t.Fatalf("header=%v: the upgrade's answer %v and the pipelined status %v: want both from %s", header, got["UP"], got["3"], upgradeVersion)
		}
		r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"agentSession.hold","params":{"sessionId":%q,"holderId":"served-on"}}`, id))
		if resp := r.recv(); resp["result"] == nil {
			t.Fatalf("header=%v: hold on the caller's connection after the upgrade: %v", header, resp)
		}
		r.send(`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1}}`)
		if resp := r.recv(); resp["error"] == nil {
			t.Fatalf("header=%v: a second initialize after the upgrade: %v; want already initialized", header, resp)
		}
	}
	if n := strings.Count(d.Log.String(), `"msg":"upgrade caller served on"`); n != 2 {
		t.Fatalf("%d upgrade callers served on, want 2:\n%s", n, d.Log.String())
	}
}
