package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

func acctConfig(a, b string) string {
	return fmt.Sprintf("[providers.echo]\n[providers.echo.accounts.a]\nenv = { SESSIOND_ECHO_HOME = %q }\n[providers.echo.accounts.b]\nenv = { SESSIOND_ECHO_HOME = %q }\n", a, b)
}

// TestE2EAccountsBadInput: a hostile client's switchAccount params, on
// the wire: an unknown account is unknown_account with data.known; an
// account of 64 KB, one with control characters, a `when` of garbage
// are invalid_params; one of 1 MB closes the connection
// (message_too_large, the frame bound); the session is untouched.
func TestE2EAccountsBadInput(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: acctConfig(t.TempDir(), t.TempDir())})
	c := d.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var si api.SessionInfo
	if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir(), Account: "a"}, &si); err != nil {
		t.Fatal(err)
	}
	call := func(params map[string]any) *rpc.Error {
		params["sessionId"] = si.SessionID
		err := c.Call(ctx, "agentSession.switchAccount", params, nil)
		var re *rpc.Error
		if !errorsAsRPC(err, &re) {
			t.Fatalf("%.80v: %v, want an error", params, err)
		}
		if len(re.Message) > 1000 {
			t.Fatalf("the refusal echoes %d bytes", len(re.Message))
		}
		return re
	}
	re := call(map[string]any{"account": "zz"})
	if re.Code != -32025 || fmt.Sprint(re.Data["known"]) != "[default a b]" {
		t.Fatalf("unknown account: %v %v", re, re.Data)
	}
	for name, p := range map[string]map[string]any{
		"64 KB account": {"account": strings.Repeat("a", 64<<10)},
		"control chars": {"account": "a\x00\x1b[2J"},
		"when garbage":  {"account": "b", "when": "\x07later"},
		"when a number": {"account": "b", "when": 7},
	} {
		if re := call(p); re.Code != -32602 {
			t.Fatalf("%s: %v %v", name, re, re.Data)
		}
	}
	big := d.Client(t)
	if err := big.Call(ctx, "agentSession.switchAccount", map[string]any{"sessionId": si.SessionID, "account": strings.Repeat("a", 1<<20)}, nil); err == nil {
		t.Fatal("a 1 MB account was answered")
	}
	var now api.SessionInfo
	if err := c.Call(ctx, "agentSession.get", api.SessionParams{SessionID: si.SessionID}, &now); err != nil || now.Account != "a" {
		t.Fatalf("after the refusals: %+v %v", now, err)
	}
}

// TestE2EAccountsFailoverUnknown: a failover list naming no account of
// the profile stops `sessiond serve` before it listens, naming it.
func TestE2EAccountsFailoverUnknown(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.toml")
	text := acctConfig(t.TempDir(), t.TempDir())
	text = strings.Replace(text, "[providers.echo]\n", "[providers.echo]\nfailover = [\"a\", \"nope\", \"a\"]\n", 1)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runDaemonExpectExit(t, "--config", cfg, "--socket", filepath.Join(t.TempDir(), "s"), "--state-dir", t.TempDir())
	if code != exitcode.Error || !strings.Contains(out, `nope`) || !strings.Contains(out, "known") {
		t.Fatalf("exit %d; output:\n%.2000s", code, out)
	}
}

// TestE2EAccountsQueuedSwitchAfterKill: a switch queued behind a running
// turn, then the daemon SIGKILLed: after the restart the record still
// has the queued switch, the next hold applies it exactly once, and the
// journal has no open turn, each turn.started one turn.completed.
func TestE2EAccountsQueuedSwitchAfterKill(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	d := daemontest.Start(t, daemontest.Options{Config: acctConfig(a, b)})
	c, rec := dialRec(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	var si api.SessionInfo
	if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir, Account: "a"}, &si); err != nil {
		t.Fatal(err)
	}
	id := si.SessionID
	if err := c.Call(ctx, "agentSession.attach", api.AttachParams{SessionID: id}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "agentSession.send", api.SendParams{SessionID: id, Text: "one"}, nil); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, rec.ch, event.TurnCompleted)
	if err := c.Call(ctx, "agentSession.send", api.SendParams{SessionID: id, Text: "/approve x"}, nil); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, rec.ch, event.ApprovalRequested)
	var r api.SwitchAccountResult
	if err := c.Call(ctx, "agentSession.switchAccount", api.SwitchAccountParams{SessionID: id, Account: "b"}, &r); err != nil || !r.Queued {
		t.Fatalf("switch %+v %v", r, err)
	}
	c.Close()
	d.Kill()
	d2 := daemontest.Start(t, daemontest.Options{Config: acctConfig(a, b), StateDir: d.StateDir})
	c2, rec2 := dialRec(t, d2)
	if err := c2.Call(ctx, "agentSession.attach", api.AttachParams{SessionID: id}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c2.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	var now api.SessionInfo
	if err := c2.Call(ctx, "agentSession.get", api.SessionParams{SessionID: id}, &now); err != nil || now.Account != "b" {
		t.Fatalf("after the restart: %+v %v", now, err)
	}
	if err := c2.Call(ctx, "agentSession.send", api.SendParams{SessionID: id, Text: "/history"}, nil); err != nil {
		t.Fatal(err)
	}
	if d := waitEvent(t, rec2.ch, event.MessageCompleted); !strings.Contains(string(d.Data), "history=1") {
		t.Fatalf("after the restart the thread has %s", d.Data)
	}
	waitEvent(t, rec2.ch, event.TurnCompleted)
	evs := readJournal(t, c2, id)
	if n := countType(evs, event.TurnCompleted); n != 3 {
		t.Fatalf("%d turn.completed, want one, the interrupted one, the last", n)
	}
	if n := countType(evs, event.AccountSwitched); n != 1 {
		t.Fatalf("%d account.switched", n)
	}
	checkTurns(t, evs)
	if err := c2.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "u"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := countType(readJournal(t, c2, id), event.AccountSwitched); n != 1 {
		t.Fatalf("a second hold applied the switch again: %d account.switched", n)
	}
}

// checkTurns: no row lost (seqs consecutive, no journal.loss), no turn
// open, each turn.started has exactly one turn.completed after it,
// retryOf names a failed turn at most once.
func checkTurns(t *testing.T, evs []event.Event) {
	t.Helper()
	started, completed, retried := map[string]bool{}, map[string]int{}, map[string]int{}
	for i, ev := range evs {
		if i > 0 && ev.Seq != evs[i-1].Seq+1 {
			t.Fatalf("seq %d follows %d", ev.Seq, evs[i-1].Seq)
		}
		switch ev.Type {
		case event.JournalLoss:
			t.Fatalf("journal.loss: %s", ev.Data)
		case event.TurnStarted:
			started[ev.TurnID] = true
			var d event.TurnStartedData
			_ = json.Unmarshal(ev.Data, &d)
			if d.RetryOf != "" {
				retried[d.RetryOf]++
			}
		case event.TurnCompleted:
			if !started[ev.TurnID] {
				t.Fatalf("turn.completed of %s before its turn.started", ev.TurnID)
			}
			completed[ev.TurnID]++
		}
	}
	for tid := range started {
		if completed[tid] != 1 {
			t.Fatalf("turn %s: %d turn.completed", tid, completed[tid])
		}
	}
	for tid, n := range retried {
		if n > 1 {
			t.Fatalf("turn %s retried %d times", tid, n)
		}
	}
}

// dialRec dials d with every capability, its notifications recorded.
func dialRec(t *testing.T, d *daemontest.Daemon) (*rpc.Client, *recorder) {
	t.Helper()
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e-accounts-probe", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rec
}

func countType(evs []event.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// TestE2EAccountsBusyQueuedSwitchAfterKill: on processes = "account", a
// switch back queued {thread_busy} behind the stale runtime's other
// session's running turn, then the daemon SIGKILLed: after the restart
// the next hold applies it once (the thread carried back whole), and
// both journals close every turn.
func TestE2EAccountsBusyQueuedSwitchAfterKill(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	cfg := strings.Replace(acctConfig(a, b), "[providers.echo]\n", "[providers.echo]\nprocesses = \"account\"\n", 1)
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	c, rec := dialRec(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	var ids []string
	for range 2 {
		var si api.SessionInfo
		if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir, Account: "a"}, &si); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, si.SessionID)
		if err := c.Call(ctx, "agentSession.attach", api.AttachParams{SessionID: si.SessionID}, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: si.SessionID, HolderID: "t"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	id, other := ids[0], ids[1]
	if err := c.Call(ctx, "agentSession.send", api.SendParams{SessionID: id, Text: "one"}, nil); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, rec.ch, event.TurnCompleted)
	var r api.SwitchAccountResult
	if err := c.Call(ctx, "agentSession.switchAccount", api.SwitchAccountParams{SessionID: id, Account: "b"}, &r); err != nil || !r.Switched {
		t.Fatalf("switch to b %+v %v", r, err)
	}
	if err := c.Call(ctx, "agentSession.send", api.SendParams{SessionID: other, Text: "/approve x"}, nil); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, rec.ch, event.ApprovalRequested)
	if err := c.Call(ctx, "agentSession.switchAccount", api.SwitchAccountParams{SessionID: id, Account: "a"}, &r); err != nil || !r.Queued {
		t.Fatalf("switch back %+v %v", r, err)
	}
	c.Close()
	d.Kill()
	d2 := daemontest.Start(t, daemontest.Options{Config: cfg, StateDir: d.StateDir})
	c2, rec2 := dialRec(t, d2)
	if err := c2.Call(ctx, "agentSession.attach", api.AttachParams{SessionID: id}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c2.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	var now api.SessionInfo
	if err := c2.Call(ctx, "agentSession.get", api.SessionParams{SessionID: id}, &now); err != nil || now.Account != "a" {
		t.Fatalf("after the restart: %+v %v", now, err)
	}
	if err := c2.Call(ctx, "agentSession.send", api.SendParams{SessionID: id, Text: "/history"}, nil); err != nil {
		t.Fatal(err)
	}
	if m := waitEvent(t, rec2.ch, event.MessageCompleted); !strings.Contains(string(m.Data), "history=1") {
		t.Fatalf("after the restart the thread has %s", m.Data)
	}
	waitEvent(t, rec2.ch, event.TurnCompleted)
	evs := readJournal(t, c2, id)
	if n := countType(evs, event.AccountSwitched); n != 2 {
		t.Fatalf("%d account.switched, want a->b and b->a", n)
	}
	checkTurns(t, evs)
	checkTurns(t, readJournal(t, c2, other))
}
