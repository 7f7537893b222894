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

// upgradeVersion is the version string of the second build the live
// upgrade tests hand over to.
const upgradeVersion = "v0.0.0-upgrade-test"

func ctxN(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// liveSession creates an echo session and holds it from c.
func liveSession(t *testing.T, c *rpc.Client) (id string, pid int) {
	t.Helper()
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	var h api.HoldResult
	if err := c.Call(ctxN(t, 60*time.Second), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, &h); err != nil {
		t.Fatal(err)
	}
	return s.SessionID, h.PID
}

func send(t *testing.T, c *rpc.Client, id, text string) {
	t.Helper()
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: id, Text: text}, nil); err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
}

// waitJournal re-reads a journal (through whichever client dial returns:
// the daemon may be between images) until ok holds for it.
func waitJournal(t *testing.T, dial func() *rpc.Client, id, what string, ok func([]event.Event) bool) []event.Event {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		evs := readJournal(t, dial(), id)
		if ok(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: no %s in the journal within 90 s; last events: %s", id, what, tail(evs, 5))
		}
		time.Sleep(20 * time.Millisecond) // another process's progress: nothing to wait on but its journal
	}
}

func tail(evs []event.Event, n int) string {
	var b strings.Builder
	for _, ev := range evs[max(0, len(evs)-n):] {
		fmt.Fprintf(&b, "%d %s %s; ", ev.Seq, ev.Type, ev.Data)
	}
	return b.String()
}

func has(typ string) func([]event.Event) bool {
	return func(evs []event.Event) bool {
		for _, ev := range evs {
			if ev.Type == typ {
				return true
			}
		}
		return false
	}
}

func turnDone(evs []event.Event) bool { return count(evs, event.TurnCompleted) > 0 }

func count(evs []event.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// deltaText is the message text the journal's deltas spell, in order.
func deltaText(t *testing.T, evs []event.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == event.MessageDelta {
			var d struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

func numbered(n, width int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%0*d", width, i)
	}
	return b.String()
}

// noInterruption fails when a journal shows the upgrade as a restart.
func noInterruption(t *testing.T, id string, evs []event.Event) {
	t.Helper()
	for _, ev := range evs {
		switch {
		case ev.Type == event.ProviderExited, ev.Type == event.SessionEnded:
			t.Errorf("session %s: %s at seq %d: %s", id, ev.Type, ev.Seq, ev.Data)
		case ev.Type == event.TurnCompleted && !strings.Contains(string(ev.Data), `"completed"`):
			t.Errorf("session %s: turn ended %s", id, ev.Data)
		}
	}
}

func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "split")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// release opens the fifo for writing and closes it: the echo provider
// blocked in /split reads EOF and writes the rest of its cut line.
func releaseFifo(t *testing.T, p string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestE2ELiveUpgrade: with an approval open on one session, a flood cut
// mid-line on a second and a flood streaming on a third, daemon.upgrade to
// a second build keeps the pid and every child, daemon.status reports the
// new version, each flood is journaled whole, once and in order, the
// approval is answered after the exec, and no journal shows an exit or an
// interrupted turn.
func TestE2ELiveUpgrade(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	dial := func() *rpc.Client { return d.Client(t) }
	before := d.Status(t)

	appr, apprPID := liveSession(t, c)
	split, splitPID := liveSession(t, c)
	flood, floodPID := liveSession(t, c)

	send(t, c, appr, "please /approve")
	evs := waitJournal(t, dial, appr, "approval.requested", has(event.ApprovalRequested))
	var req event.ApprovalRequestedData
	for _, ev := range evs {
		if ev.Type == event.ApprovalRequested {
			json.Unmarshal(ev.Data, &req)
		}
	}

	const splitN, floodN, width = 2000, 30000, 8
	fifo := mkfifo(t)
	send(t, c, split, fmt.Sprintf("/flood %d %d /numbered /split %s", splitN, width, fifo))
	waitJournal(t, dial, split, "the flood's first half", func(evs []event.Event) bool {
		return len(deltaText(t, evs)) >= splitN/2*width
	})
	send(t, c, flood, fmt.Sprintf("/flood %d %d /numbered", floodN, width))
	waitJournal(t, dial, flood, "the flood streaming", has(event.MessageDelta))

	var res api.UpgradeResult
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, d.Log.String())
	}
	if res.PID != before.PID || res.ToVersion != upgradeVersion || res.FromVersion != before.Version {
		t.Fatalf("upgrade answered %+v; before: pid %d version %s", res, before.PID, before.Version)
	}
	after := d.Status(t)
	if after.PID != before.PID || after.Version != upgradeVersion {
		t.Fatalf("after the upgrade: pid %d version %q; want pid %d version %q", after.PID, after.Version, before.PID, upgradeVersion)
	}
	c2 := d.Client(t)
	for id, pid := range map[string]int{appr: apprPID, split: splitPID, flood: floodPID} {
		var s api.SessionInfo
		if err := c2.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil {
			t.Fatal(err)
		}
		if s.PID != pid || s.State != "live" {
			t.Errorf("session %s after the upgrade: pid %d state %s; want pid %d live", id, s.PID, s.State, pid)
		}
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
	}
	t.Logf("adopted: %s", grepLines(d.Log.String(), "session adopted", "re-executing", "upgrade complete"))
	if !strings.Contains(d.Log.String(), `"upgrade complete"`) {
		t.Errorf("no 'upgrade complete' line:\n%s", d.Log.String())
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// grepLines returns the log lines that contain any of subs.
func grepLines(log string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
