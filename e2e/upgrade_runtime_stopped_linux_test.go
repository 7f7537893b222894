package e2e

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ELiveUpgradeStoppedRuntime: a shared runtime is SIGSTOPped with a
// numbered flood streaming on one thread and an approval open on another,
// and the daemon is live-upgraded while it is stopped (nothing of the
// handover needs the provider to answer). After the exec the runtime is
// continued: the same runtime and pid serve both sessions, the flood is
// journaled whole, once and in order with gapless seqs, and the approval
// answered after the exec completes its turn.
func TestE2ELiveUpgradeStoppedRuntime(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{Config: "idle_timeout = \"3s\"\n[providers.echo]\nprocesses = \"account\"\n"})
	c := d.Client(t)
	cur := c
	dial := func() *rpc.Client { return cur }
	flood, pid := liveSession(t, c)
	appr, apprPID := liveSession(t, c)
	if apprPID != pid {
		t.Fatalf("the sessions run in pids %d and %d, want one runtime", pid, apprPID)
	}
	send(t, c, appr, "please /approve")
	evs := waitJournal(t, dial, appr, "approval.requested", has(event.ApprovalRequested))
	var req event.ApprovalRequestedData
	for _, ev := range evs {
		if ev.Type == event.ApprovalRequested {
			_ = json.Unmarshal(ev.Data, &req)
		}
	}
	const floodN, width = 30000, 8
	send(t, c, flood, fmt.Sprintf("/flood %d %d /numbered", floodN, width))
	waitJournal(t, dial, flood, "the flood streaming", has(event.MessageDelta))
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	defer func() {
		if !continued {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, nil); err != nil {
		t.Fatalf("upgrade with the runtime stopped: %v\n%s", err, d.Log.String())
	}
	c2 := d.Client(t)
	cur = c2
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continued = true
	for _, id := range []string{flood, appr} {
		var h api.HoldResult
		if err := c2.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "t"}, &h); err != nil || h.PID != pid {
			t.Fatalf("re-hold %s after the upgrade: pid %d (%v), want %d", id, h.PID, err, pid)
		}
	}
	if err := c2.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: appr, RequestID: req.RequestID, Decision: "approve"}, nil); err != nil {
		t.Fatalf("respond to the approval opened before the upgrade: %v", err)
	}
	for id, want := range map[string]string{appr: "echo: please /approve", flood: numbered(floodN, width)} {
		evs := waitJournal(t, dial, id, "turn.completed", turnDone)
		if got := deltaText(t, evs); got != want {
			t.Errorf("session %s: deltas spell %d bytes, want %d (first difference at %d)", id, len(got), len(want), firstDiff(got, want))
		}
		noInterruption(t, id, evs)
		gapless(t, id, evs)
	}
}
