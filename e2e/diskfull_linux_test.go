package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// smallDisk mounts a tmpfs of size bytes (root only) and returns a state
// dir on it, unmounted at cleanup.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	return state
}

// fillDisk writes a file next to the state dir until the disk is full;
// the returned func deletes it (space returns).
func fillDisk(t *testing.T, state string) (free func()) {
	t.Helper()
	path := filepath.Join(filepath.Dir(state), "fill")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			break
		}
	}
	f.Close()
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// fullDuringTurn starts an echo session on a small tmpfs, has it run a
// turn that waits for an approval, fills the disk, answers the approval
// (the turn's flood and its end cannot be stored) and waits until the
// daemon says its store refuses writes.
func fullDuringTurn(t *testing.T) (d *daemontest.Daemon, c *rpc.Client, rec *recorder, id string, free func()) {
	state := smallDisk(t, "4m")
	d = daemontest.Start(t, daemontest.Options{StateDir: state})
	c, rec = dialCaps(t, d, rpc.Capabilities)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "h"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "/approve /flood 200 1000"}, nil); err != nil {
		t.Fatal(err)
	}
	req := decodeData[event.ApprovalRequestedData](t, waitEvent(t, rec.ch, event.ApprovalRequested))
	free = fillDisk(t, state)
	if err := c.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: s.SessionID, RequestID: req.RequestID, Decision: "approve"}, nil); err != nil {
		t.Fatal(err)
	}
	waitLog(t, d, `"msg":"journal commit failed`)
	return d, c, rec, s.SessionID, free
}

// TestE2EDiskFullTurnEndsWhenSpaceReturns: a turn ends while the disk is
// full; a send answers store_unavailable naming the store (not
// turn_running, and it journals nothing); once space returns the turn's
// own tail lands (turn.completed completed, every delta kept, no loss) and
// the next send works; ctl doctor says the store refuses writes, then
// no more.
func TestE2EDiskFullTurnEndsWhenSpaceReturns(t *testing.T) {
	d, c, rec, id, free := fullDuringTurn(t)
	err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: id, Text: "while full"}, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "store_unavailable" || re.Code != -32027 ||
		!strings.Contains(re.Message, "no space left on device") || !strings.Contains(fmt.Sprint(re.Data["cause"]), "sessiond.db") {
		t.Fatalf("send on a full disk: %v, want store_unavailable naming the store and the cause", err)
	}
	if code, rep, out := doctorJSON(t, d.Socket); code != exitcode.Error || len(problemsOf(rep, "store-writable")) != 1 ||
		!strings.Contains(problemsOf(rep, "store-writable")[0].What, "no space left on device") {
		t.Fatalf("doctor on a full disk: exit %d, want the store-writable problem:\n%s", code, out)
	}
	free()
	done := decodeData[event.TurnCompletedData](t, waitEvent(t, rec.ch, event.TurnCompleted))
	if done.Status != event.StatusCompleted {
		t.Fatalf("the turn that ended on a full disk: %+v, want completed", done)
	}
	var r api.SendResult
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: id, Text: "after"}, &r); err != nil {
		t.Fatalf("send once space returned: %v", err)
	}
	waitEvent(t, rec.ch, event.TurnCompleted)
	evs := readJournal(t, c, id)
	var deltas strings.Builder
	var answer string
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("journal seq %d at %d: not gapless", ev.Seq, i)
		}
		switch ev.Type {
		case event.JournalLoss:
			t.Fatalf("a loss was journaled: %s", ev.Data)
		case event.TurnStarted:
			if strings.Contains(string(ev.Data), "while full") {
				t.Fatalf("the send refused on a full disk was journaled: %s", ev.Data)
			}
		case event.MessageDelta:
			if ev.TurnID != r.TurnID {
				deltas.WriteString(decodeData[struct{ Text string }](t, ev).Text)
			}
		case event.MessageCompleted:
			if ev.TurnID != r.TurnID {
				answer = decodeData[struct{ Text string }](t, ev).Text
			}
		}
	}
	if len(answer) != 200*1000 || deltas.String() != answer {
		t.Fatalf("the turn's answer: %d bytes, deltas %d bytes, want 200000 each", len(answer), deltas.Len())
	}
	assertSeen(t, rec, evs)
	if code, rep, out := doctorJSON(t, d.Socket); code != 0 || len(problemsOf(rep, "store-writable")) != 0 {
		t.Fatalf("doctor once space returned: exit %d\n%s", code, out)
	}
}

// assertSeen: every event published to the client is in the journal, the
// same seq with the same type.
func assertSeen(t *testing.T, rec *recorder, evs []event.Event) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, ev := range rec.evs {
		if ev.Seq == 0 || ev.Seq > uint64(len(evs)) || evs[ev.Seq-1].Type != ev.Type {
			t.Fatalf("published event %d %s is not in the journal", ev.Seq, ev.Type)
		}
	}
}

// TestE2EDiskFullRestart: the daemon dies (SIGKILL) while its store
// refuses writes mid-turn; space returns and the next start closes the
// turn (daemon_restart), and every event published before is still there.
func TestE2EDiskFullRestart(t *testing.T) {
	d, _, rec, id, free := fullDuringTurn(t)
	d.Kill()
	free()
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir})
	c2 := d2.Client(t)
	evs := readJournal(t, c2, id)
	var types []string
	for _, ev := range evs[len(evs)-4:] {
		types = append(types, ev.Type)
	}
	want := []string{event.TurnCompleted, event.ProviderExited, event.SessionEnded, event.LeaseReleased}
	if !slices.Equal(types, want) || !strings.Contains(string(evs[len(evs)-4].Data), event.ReasonDaemonRestart) {
		t.Fatalf("tail after restart %v, want %v (daemon_restart)", types, want)
	}
	assertSeen(t, rec, evs)
	var info api.SessionInfo
	if err := c2.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &info); err != nil || info.TurnRunning {
		t.Fatalf("after restart: %+v %v", info, err)
	}
}

// TestE2EDiskFullCloseRetries: a close while the store refuses writes
// fails at the step that writes (eviction_failed, drain-published, the
// store's error as cause) and forgets nothing; once space returns the
// next close completes every step and the journal ends with the tail.
func TestE2EDiskFullCloseRetries(t *testing.T) {
	_, c, _, id, free := fullDuringTurn(t)
	err := c.Call(ctx10(t), "agentSession.close", api.SessionParams{SessionID: id}, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "eviction_failed" || re.Data["step"] != "drain-published" ||
		!strings.Contains(fmt.Sprint(re.Data["cause"]), "store unavailable") {
		t.Fatalf("close on a full disk: %v, want eviction_failed at drain-published naming the store", err)
	}
	var info api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &info); err != nil || info.State == "stored" {
		t.Fatalf("after the failed close: %+v %v, want the session still indexed", info, err)
	}
	free()
	// The daemon retries a failed close by itself (backoff from 1 s): on a
	// loaded machine that retry may complete before this close, which then
	// finds a stored session and runs no step. Either way every step ran
	// once and the tail below is checked.
	var cr api.CloseResult
	if err := c.Call(ctx10(t), "agentSession.close", api.SessionParams{SessionID: id}, &cr); err != nil ||
		(len(cr.Steps) != 6 && len(cr.Steps) != 0) {
		t.Fatalf("close once space returned: %+v %v", cr, err)
	}
	evs := readJournal(t, c, id)
	var types []string
	for _, ev := range evs[len(evs)-3:] {
		types = append(types, ev.Type)
	}
	if want := []string{event.ProviderExited, event.SessionEnded, event.LeaseReleased}; !slices.Equal(types, want) {
		t.Fatalf("tail %v, want %v", types, want)
	}
	if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &info); err != nil || info.TurnRunning || info.State != "stored" {
		t.Fatalf("after the close: %+v %v", info, err)
	}
}

// TestE2EDiskFullRespondRefused: while the store refuses writes, a respond
// answers store_unavailable before it reaches the provider (it would act
// on an answer whose outcome could only be held in memory): the approval
// stays pending, and once space returns the same respond works and is
// journaled as the client's answer, with no loss.
func TestE2EDiskFullRespondRefused(t *testing.T) {
	state := smallDisk(t, "4m")
	d := daemontest.Start(t, daemontest.Options{StateDir: state})
	c, rec := dialCaps(t, d, rpc.Capabilities)
	var ids []string
	reqs := map[string]string{}
	for range 2 {
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
			t.Fatal(err)
		}
		if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "h"}, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "/approve /flood 50 1000"}, nil); err != nil {
			t.Fatal(err)
		}
		ev := waitEvent(t, rec.ch, event.ApprovalRequested)
		reqs[ev.SessionID] = decodeData[event.ApprovalRequestedData](t, ev).RequestID
		ids = append(ids, s.SessionID)
	}
	a, b := ids[0], ids[1]
	free := fillDisk(t, state)
	// a's answer reaches its provider (the store has not refused yet); its
	// flood cannot be stored: the store refuses from then on.
	if err := c.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: a, RequestID: reqs[a], Decision: "approve"}, nil); err != nil {
		t.Fatal(err)
	}
	waitLog(t, d, `"msg":"journal commit failed`)
	respondB := api.RespondParams{SessionID: b, RequestID: reqs[b], Decision: "approve"}
	err := c.Call(ctx10(t), "agentSession.respond", respondB, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "store_unavailable" || !strings.Contains(re.Message, "no space left on device") {
		t.Fatalf("respond while the store refuses writes: %v, want store_unavailable", err)
	}
	free()
	waitEvent(t, rec.ch, event.TurnCompleted) // a's turn, from its held rows
	if err := c.Call(ctx10(t), "agentSession.respond", respondB, nil); err != nil {
		t.Fatalf("the same respond once space returned: %v (did the refused one reach the provider?)", err)
	}
	waitEvent(t, rec.ch, event.TurnCompleted)
	for _, id := range ids {
		var resolved []event.ApprovalResolvedData
		for _, ev := range readJournal(t, c, id) {
			if ev.Type == event.JournalLoss {
				t.Fatalf("session %s: a loss was journaled: %s", id, ev.Data)
			}
			if ev.Type == event.ApprovalResolved {
				resolved = append(resolved, decodeData[event.ApprovalResolvedData](t, ev))
			}
		}
		if len(resolved) != 1 || resolved[0].Decision != "approve" || resolved[0].By == "daemon" {
			t.Fatalf("session %s: approvals resolved %+v, want the client's approve once", id, resolved)
		}
	}
}

// TestE2EDiskFullCreateChangesNothing: a create on a full disk answers
// store_unavailable and leaves no session behind: list shows none while
// the disk is full, none once space returns (also after a restart), and
// a create then works.
func TestE2EDiskFullCreateChangesNothing(t *testing.T) {
	state := smallDisk(t, "4m")
	d := daemontest.Start(t, daemontest.Options{StateDir: state})
	c := d.Client(t)
	free := fillDisk(t, state)
	for i := range 3 {
		err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir(), Title: fmt.Sprint("full ", i)}, nil)
		var re *rpc.Error
		if !errors.As(err, &re) || re.Reason != "store_unavailable" {
			t.Fatalf("create %d on a full disk: %v, want store_unavailable", i, err)
		}
	}
	listNone := func(when string) {
		t.Helper()
		var l api.ListResult
		if err := c.Call(ctx10(t), "agentSession.list", api.ListParams{}, &l); err != nil || len(l.Sessions) != 0 {
			t.Fatalf("list %s: %+v %v, want no session", when, l.Sessions, err)
		}
	}
	listNone("on the full disk")
	free()
	listNone("once space returned")
	d.Stop()
	d = daemontest.Start(t, daemontest.Options{StateDir: state})
	c = d.Client(t)
	listNone("after a restart")
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, nil); err != nil {
		t.Fatalf("create once space returned: %v", err)
	}
}
