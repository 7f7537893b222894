package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ELiveUpgradeClaude: two sessions of the pinned Claude Code CLI,
// one with a turn streaming (its model stream stalled after two of four
// deltas, the text block open) and one with a Bash can_use_tool approval
// pending. daemon.upgrade to a second build succeeds (no provider makes
// it refuse): the pid and each CLI's pid stay, the approval is answered
// after the exec and the command runs, the stalled stream resumes, and
// each journal holds every event once: one turn started and completed
// (completed), the deltas spelling the whole text, one message.completed
// with it, one approval requested and resolved.
func TestE2ELiveUpgradeClaude(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	bin := claudetest.Binary(t)
	stall := make(chan struct{})
	stalled := false
	t.Cleanup(func() {
		if !stalled {
			close(stall)
		}
	})
	mStream := claudetest.NewModel(t, claudetest.Reply{Deltas: []string{"one ", "two ", "three ", "four"}, Stall: stall, StallAfter: 2})
	dir := t.TempDir()
	mAppr := claudetest.NewModel(t, claudetest.Bash("toolu_1", "touch ran && echo ran"), claudetest.Text("done"))
	cfg := "start_timeout = \"60s\"\n" +
		claudetest.ProviderTable("claude-stream", bin, claudetest.NewEnv(t, mStream.URL)) +
		claudetest.ProviderTable("claude-appr", bin, claudetest.NewEnv(t, mAppr.URL))
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	c := d.Client(t)
	dial := func() *rpc.Client { return d.Client(t) }
	before := d.Status(t)

	hold := func(provider, cwd string) (string, api.HoldResult) {
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: provider, Cwd: cwd}, &s); err != nil {
			t.Fatal(err)
		}
		var h api.HoldResult
		if err := c.Call(ctxN(t, 60*time.Second), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, &h); err != nil {
			t.Fatalf("hold %s: %v\n%s", provider, err, d.Log.String())
		}
		return s.SessionID, h
	}
	stream, streamHold := hold("claude-stream", t.TempDir())
	appr, apprHold := hold("claude-appr", dir)

	send(t, c, stream, "count to four")
	waitJournal(t, dial, stream, "two deltas", func(evs []event.Event) bool { return deltaText(t, evs) == "one two " })
	send(t, c, appr, "run it")
	evs := waitJournal(t, dial, appr, "approval.requested", has(event.ApprovalRequested))
	var req event.ApprovalRequestedData
	for _, ev := range evs {
		if ev.Type == event.ApprovalRequested {
			json.Unmarshal(ev.Data, &req)
		}
	}

	var res api.UpgradeResult
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil {
		t.Fatalf("upgrade with Claude sessions mid-turn: %v\n%s", err, d.Log.String())
	}
	if res.PID != before.PID || res.ToVersion != upgradeVersion {
		t.Fatalf("upgrade answered %+v; before: pid %d", res, before.PID)
	}
	c2 := d.Client(t)
	for id, pid := range map[string]int{stream: streamHold.PID, appr: apprHold.PID} {
		var s api.SessionInfo
		if err := c2.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil {
			t.Fatal(err)
		}
		if s.PID != pid || s.State != "live" {
			t.Errorf("session %s after the upgrade: pid %d state %s; want pid %d live", id, s.PID, s.State, pid)
		}
	}

	if err := c2.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: appr, RequestID: req.RequestID, Decision: "approve"}, nil); err != nil {
		t.Fatalf("respond to the approval opened before the upgrade: %v", err)
	}
	stalled = true
	close(stall)
	for id, want := range map[string]string{stream: "one two three four", appr: "done"} {
		evs := waitJournal(t, dial, id, "turn.completed", turnDone)
		if got := deltaText(t, evs); got != want {
			t.Errorf("session %s: deltas spell %q, want %q", id, got, want)
		}
		noInterruption(t, id, evs)
		once := map[string]int{event.TurnStarted: 1, event.TurnCompleted: 1, event.ProviderStarted: 1}
		if id == appr {
			once[event.ApprovalRequested], once[event.ApprovalResolved] = 1, 1
		}
		for typ, n := range once {
			if got := count(evs, typ); got != n {
				t.Errorf("session %s: %d %s, want %d: %s", id, got, typ, n, tail(evs, 30))
			}
		}
		var completed []string
		for _, ev := range evs {
			if ev.Type == event.MessageCompleted {
				var m event.DeltaData
				json.Unmarshal(ev.Data, &m)
				completed = append(completed, m.Text)
			}
		}
		if len(completed) != 1 || completed[0] != want {
			t.Errorf("session %s: message.completed %q, want once %q", id, completed, want)
		}
	}
	if evs := readJournal(t, c2, appr); !strings.Contains(tail(evs, 100), `"output":"ran`) {
		t.Errorf("the approved command's output is not journaled: %s", tail(evs, 10))
	}
	if !strings.Contains(d.Log.String(), `"upgrade complete"`) {
		t.Errorf("no 'upgrade complete' line:\n%s", d.Log.String())
	}
}
