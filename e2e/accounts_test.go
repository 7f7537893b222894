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
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EAccounts: the built daemon with two echo accounts: create on a,
// a turn, `ctl switch` to b (native: the thread's file carried, resumed
// by id), a turn that sees the earlier one, `ctl accounts`, and the wire's
// unknown_account; a connection without accounts.v1 never sees the
// account events.
func TestE2EAccounts(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	cfg := fmt.Sprintf("[providers.echo]\nfailover = [\"a\", \"b\"]\n[providers.echo.accounts.a]\nenv = { SESSIOND_ECHO_HOME = %q }\n[providers.echo.accounts.b]\nenv = { SESSIOND_ECHO_HOME = %q }\n", a, b)
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e-accounts", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	err = c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir, Account: "zz"}, nil)
	var re *rpc.Error
	if !errorsAsRPC(err, &re) || re.Code != -32025 || re.Reason != "unknown_account" {
		t.Fatalf("unknown account: %v", err)
	}
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
	turn := func(text string) string {
		if err := c.Call(ctx, "agentSession.send", api.SendParams{SessionID: id, Text: text}, nil); err != nil {
			t.Fatal(err)
		}
		var dd event.DeltaData
		if err := json.Unmarshal(waitEvent(t, rec.ch, event.MessageCompleted).Data, &dd); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, rec.ch, event.TurnCompleted)
		return dd.Text
	}
	turn("one")
	code, out, errOut := runCtl(t, d.Socket, dir, "switch", id, "b")
	if code != 0 || !strings.Contains(out, "switched to") {
		t.Fatalf("ctl switch: %d %q %q", code, out, errOut)
	}
	waitEvent(t, rec.ch, event.AccountSwitched)
	if got := turn("/history"); !strings.HasSuffix(got, "history=1") {
		t.Fatalf("after the switch: %q", got)
	}
	var now api.SessionInfo
	if err := c.Call(ctx, "agentSession.get", api.SessionParams{SessionID: id}, &now); err != nil || now.Account != "b" {
		t.Fatalf("get: %+v %v", now, err)
	}
	if _, err := os.Stat(filepath.Join(b, now.ThreadID+".jsonl")); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCtl(t, d.Socket, dir, "accounts")
	if code != 0 || !strings.Contains(out, "echo") || !strings.Contains(out, "ACCOUNT") {
		t.Fatalf("ctl accounts: %d %q", code, out)
	}
	var la api.ListAccountsResult
	if err := c.Call(ctx, "agentSession.listAccounts", api.ListAccountsParams{Provider: "echo"}, &la); err != nil {
		t.Fatal(err)
	}
	if len(la.Accounts) != 3 || la.Accounts[2].Name != "b" || la.Accounts[2].Sessions != 1 {
		t.Fatalf("listAccounts %+v", la)
	}
	old := d.Client(t, api.CapAttach)
	var rr api.ReadResult
	if err := old.Call(ctx, "agentSession.read", api.ReadParams{SessionID: id, Limit: 1000}, &rr); err != nil {
		t.Fatal(err)
	}
	for _, ev := range rr.Events {
		if strings.HasPrefix(ev.Type, "account.") {
			t.Fatalf("a connection without accounts.v1 got %s", ev.Type)
		}
	}
}

func errorsAsRPC(err error, target **rpc.Error) bool {
	e, ok := err.(*rpc.Error)
	if ok {
		*target = e
	}
	return ok
}
