package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ELiveUpgradeSharedRuntime: three sessions are threads of one echo
// runtime (processes = "account"): an approval open on one, a flood cut
// mid-line on a second (the runtime's reader holds half a line at the
// pause) and a flood streaming on a third. An upgrade to a binary that
// reads only the per-session handoff format is refused (and the runtime
// let go again); daemon.upgrade to one that reads it hands the
// runtime over: after the exec the same runtime id and pid serve the
// three sessions, each flood is journaled whole, once and in order with
// gapless seqs, the approval answered after the exec completes its turn,
// a new session's hold goes into the same runtime and runs a turn, and
// once every session is released the runtime stops after idle_timeout.
func TestE2ELiveUpgradeSharedRuntime(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{Config: "idle_timeout = \"3s\"\n[providers.echo]\nprocesses = \"account\"\n"})
	c := d.Client(t)
	cur := c // the client the journal waits read through (a new one after the exec)
	dial := func() *rpc.Client { return cur }
	before := d.Status(t)

	appr, pid := liveSession(t, c)
	split, splitPID := liveSession(t, c)
	flood, floodPID := liveSession(t, c)
	if splitPID != pid || floodPID != pid {
		t.Fatalf("the three sessions run in pids %d %d %d, want one runtime", pid, splitPID, floodPID)
	}
	runtimeOf := func(c *rpc.Client, id string) api.SessionInfo {
		t.Helper()
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	runtimeID := runtimeOf(c, appr).RuntimeID
	if !strings.HasPrefix(runtimeID, "r_") {
		t.Fatalf("session %s is on runtime %q", appr, runtimeID)
	}

	send(t, c, appr, "please /approve")
	evs := waitJournal(t, dial, appr, "approval.requested", has(event.ApprovalRequested))
	var req event.ApprovalRequestedData
	for _, ev := range evs {
		if ev.Type == event.ApprovalRequested {
			json.Unmarshal(ev.Data, &req)
		}
	}
	const splitN, floodN, width = 2000, 30000, 8
	send(t, c, flood, fmt.Sprintf("/flood %d %d /numbered", floodN, width))
	waitJournal(t, dial, flood, "the flood streaming", has(event.MessageDelta))
	fifo := mkfifo(t)
	send(t, c, split, fmt.Sprintf("/flood %d %d /numbered /split %s", splitN, width, fifo))
	waitJournal(t, dial, split, "the flood's first half", func(evs []event.Event) bool {
		return len(deltaText(t, evs)) >= splitN/2*width
	})

	// A binary that reads only the per-session handoff would close these
	// sessions: refused, naming the format; the runtime is let go again
	// (reader resumed, nothing lost: checked below).
	old := script(t, `case "$1 $2" in "version --handoff") echo sessiond-handoff/1; exit 0;; esac; exec "$REAL" "$@"`)
	err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: old}, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "upgrade_refused" ||
		!strings.Contains(fmt.Sprint(re.Data["cause"]), "not sessiond-handoff/2 (shared runtime "+runtimeID) {
		t.Fatalf("upgrade to a binary reading only sessiond-handoff/1: %v", err)
	}

	var res api.UpgradeResult
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, d.Log.String())
	}
	if res.PID != before.PID || res.ToVersion != upgradeVersion {
		t.Fatalf("upgrade answered %+v; before: pid %d", res, before.PID)
	}
	c2 := d.Client(t)
	cur = c2
	for _, id := range []string{appr, split, flood} {
		var h api.HoldResult
		if err := c2.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "t"}, &h); err != nil {
			t.Fatalf("re-hold %s after the upgrade: %v", id, err)
		}
		if s := runtimeOf(c2, id); s.PID != pid || s.RuntimeID != runtimeID || s.State != "live" || h.PID != pid {
			t.Errorf("session %s after the upgrade: runtime %s pid %d (hold %d) state %s; want runtime %s pid %d live",
				id, s.RuntimeID, s.PID, h.PID, s.State, runtimeID, pid)
		}
	}
	var st rpc.Status
	if err := d.Client(t, api.CapRuntimes).Call(ctx10(t), "daemon.status", struct{}{}, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Runtimes) != 1 || st.Runtimes[0].RuntimeID != runtimeID || st.Runtimes[0].PID != pid || st.Runtimes[0].Sessions != 3 {
		t.Fatalf("daemon.status.runtimes after the upgrade: %+v", st.Runtimes)
	}

	releaseFifo(t, fifo)
	if err := c2.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: appr, RequestID: req.RequestID, Decision: "approve"}, nil); err != nil {
		t.Fatalf("respond to the approval opened before the upgrade: %v", err)
	}
	for id, want := range map[string]string{appr: "echo: please /approve", split: numbered(splitN, width), flood: numbered(floodN, width)} {
		evs := waitJournal(t, dial, id, "turn.completed", turnDone)
		if got := deltaText(t, evs); got != want {
			t.Errorf("session %s: deltas spell %d bytes, want %d (first difference at %d)", id, len(got), len(want), firstDiff(got, want))
		}
		noInterruption(t, id, evs)
		gapless(t, id, evs)
	}

	// A new session holds into the same runtime and runs a turn there.
	fresh, freshPID := liveSession(t, c2)
	if s := runtimeOf(c2, fresh); freshPID != pid || s.RuntimeID != runtimeID {
		t.Fatalf("a hold after the upgrade: runtime %s pid %d; want the adopted %s pid %d", s.RuntimeID, freshPID, runtimeID, pid)
	}
	send(t, c2, fresh, "after")
	if got := deltaText(t, waitJournal(t, dial, fresh, "turn.completed", turnDone)); got != "echo: after" {
		t.Fatalf("the new session's reply is %q", got)
	}

	for _, id := range []string{appr, split, flood, fresh} {
		var rr api.ReleaseResult
		if err := c2.Call(ctx10(t), "agentSession.release", api.ReleaseParams{SessionID: id, HolderID: "t"}, &rr); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{appr, split, flood, fresh} {
		waitJournal(t, dial, id, "lease.released", has(event.LeaseReleased))
	}
	if !exitsWithin(t, pid, 0, 30*time.Second) {
		t.Fatalf("the adopted runtime %d still runs after every session was released", pid)
	}
	waitLog(t, d, `"runtime evicted"`)
	t.Logf("%s", grepLines(d.Log.String(), "runtime adopted", "session adopted", "runtime evicted"))
}

// gapless fails when a journal's seqs skip or repeat, or an event (by
// type, turn and data) appears twice.
func gapless(t *testing.T, id string, evs []event.Event) {
	t.Helper()
	seen := map[string]uint64{}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Errorf("session %s: event %d has seq %d", id, i, ev.Seq)
			return
		}
		k := ev.Type + "\x00" + ev.TurnID + "\x00" + string(ev.Data)
		if s, dup := seen[k]; dup {
			t.Errorf("session %s: seq %d repeats seq %d: %s %s", id, ev.Seq, s, ev.Type, ev.Data)
		}
		seen[k] = ev.Seq
	}
}

// TestE2ELiveUpgradeIdleRuntime: a shared runtime no session is on (its
// release clock running) is handed over too, not stopped: after the exec
// daemon.status lists it with the same id and pid and no session, and its
// release clock, armed before the exec, stops it.
func TestE2ELiveUpgradeIdleRuntime(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{Config: "idle_timeout = \"2s\"\n[providers.echo]\nprocesses = \"account\"\n"})
	c := d.Client(t, api.CapAttach, api.CapStructuredHold, api.CapTurns, api.CapClose, api.CapRuntimes, api.CapUpgrade, api.CapAdmin)
	id, pid := liveSession(t, c)
	var cr api.CloseResult
	if err := c.Call(ctx10(t), "agentSession.close", map[string]any{"sessionId": id}, &cr); err != nil {
		t.Fatal(err)
	}
	waitJournal(t, func() *rpc.Client { return c }, id, "lease.released", has(event.LeaseReleased))
	status := func(c *rpc.Client) []api.RuntimeInfo {
		var st rpc.Status
		if err := c.Call(ctx10(t), "daemon.status", struct{}{}, &st); err != nil {
			t.Fatal(err)
		}
		return st.Runtimes
	}
	before := status(c)
	if len(before) != 1 || before[0].PID != pid || before[0].Sessions != 0 {
		t.Fatalf("runtimes before the upgrade: %+v", before)
	}
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, nil); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, d.Log.String())
	}
	after := status(d.Client(t, api.CapRuntimes))
	if len(after) != 1 || after[0].RuntimeID != before[0].RuntimeID || after[0].PID != pid || after[0].Sessions != 0 {
		t.Fatalf("runtimes after the upgrade: %+v; before: %+v", after, before)
	}
	if !exitsWithin(t, pid, 0, 30*time.Second) {
		t.Fatalf("the handed-over idle runtime %d still runs after its release clock", pid)
	}
	waitLog(t, d, `"why":"idle"`)
	// The record came over with the store: the new image deleted it once
	// the runtime was proven gone.
	d.Stop()
	if recs := runtimeRecords(t, d.StateDir); len(recs) != 0 {
		t.Fatalf("runtime records after the handed-over runtime stopped: %+v", recs)
	}
}
