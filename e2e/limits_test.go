package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EOversizedFieldsRefused: against the real daemon, a 32,769-byte
// clientMessageId (over bbolt's key limit), a 900 KB holderId, a 1 MB title
// and ttlMs 1e13 are each invalid_params naming the field, nothing of them
// is stored, and the session they named goes on working: the next send
// completes with every delta journaled, and the hold taken before is
// still there. No reply or log line repeats more than a prefix.
func TestE2EOversizedFieldsRefused(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, &api.AttachResult{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "h1"}, &api.HoldResult{}); err != nil {
		t.Fatal(err)
	}
	big := func(n int) string { return strings.Repeat("A", n) }
	ttl := int64(1e13)
	refused := []struct {
		method, field string
		params        any
	}{
		{"agentSession.send", "clientMessageId", api.SendParams{SessionID: s.SessionID, Text: "lost?", ClientMessageID: big(32769)}},
		{"agentSession.hold", "holderId", api.HoldParams{SessionID: s.SessionID, HolderID: big(900 << 10)}},
		{"agentSession.hold", "ttlMs", api.HoldParams{SessionID: s.SessionID, HolderID: "h2", TTLMs: &ttl}},
		{"agentSession.create", "title", api.CreateParams{Provider: "echo", Cwd: t.TempDir(), Title: big(1000000)}},
	}
	for _, tc := range refused {
		err := c.Call(ctx10(t), tc.method, tc.params, nil)
		var e *rpc.Error
		if !errors.As(err, &e) || e.Reason != "invalid_params" || e.Data["field"] != tc.field {
			t.Fatalf("%s with oversized %s: %.300v, want invalid_params", tc.method, tc.field, err)
		}
		if strings.Contains(e.Message, big(33)) {
			t.Fatalf("%s: message repeats the value: %.200q", tc.method, e.Message)
		}
	}
	// Values within their bound that name nothing: the errors repeat a prefix.
	unknown := []struct {
		method, reason string
		params         any
	}{
		{"agentSession.create", "unknown_provider", api.CreateParams{Provider: big(200), Cwd: t.TempDir()}},
		{"agentSession.respond", "request_not_found", api.RespondParams{SessionID: s.SessionID, RequestID: big(200), Decision: "deny"}},
		{"agentSession.detach", "invalid_params", api.DetachParams{SubscriptionID: big(200)}},
	}
	for _, tc := range unknown {
		err := c.Call(ctx10(t), tc.method, tc.params, nil)
		var e *rpc.Error
		if !errors.As(err, &e) || e.Reason != tc.reason {
			t.Fatalf("%s: %.300v, want %s", tc.method, err, tc.reason)
		}
		if strings.Contains(e.Message, big(33)) || strings.Contains(fmt.Sprint(e.Data), big(33)) {
			t.Fatalf("%s: error repeats the value: %.300q %.300v", tc.method, e.Message, e.Data)
		}
	}

	var sr api.SendResult
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "hi", ClientMessageID: "m1"}, &sr); err != nil {
		t.Fatalf("send after the refusals: %v", err)
	}
	waitEvent(t, rec.ch, event.TurnCompleted)
	var rd api.ReadResult
	if err := c.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: s.SessionID, Limit: 4096}, &rd); err != nil {
		t.Fatal(err)
	}
	var deltas, completed string
	turns := 0
	for i, ev := range rd.Events {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("journal seq %d at %d", ev.Seq, i)
		}
		var dt struct{ Text, Status string }
		json.Unmarshal(ev.Data, &dt)
		switch ev.Type {
		case event.TurnStarted:
			turns++
		case event.MessageDelta:
			deltas += dt.Text
		case event.MessageCompleted:
			completed = dt.Text
		case event.TurnCompleted:
			if dt.Status != event.StatusCompleted {
				t.Fatalf("turn %s", ev.Data)
			}
		}
	}
	if turns != 1 || completed == "" || deltas != completed {
		t.Fatalf("journal: %d turns, deltas %q, completed %q", turns, deltas, completed)
	}
	var got api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: s.SessionID}, &got); err != nil {
		t.Fatal(err)
	}
	if got.State != "live" || got.TurnRunning || strings.Join(got.Holders, ",") != "h1" {
		t.Fatalf("session after the refusals: %+v", got)
	}
	var l api.ListResult
	if err := c.Call(ctx10(t), "agentSession.list", nil, &l); err != nil || len(l.Sessions) != 1 {
		t.Fatalf("list: %d sessions, %v (the refused create stored one?)", len(l.Sessions), err)
	}
	if strings.Contains(d.Log.String(), big(33)) {
		t.Fatal("the daemon's log repeats an oversized value")
	}
}

// TestE2ECtlEscapesStoredText: a title and a holder id holding ESC, CR
// and BEL are printed by `ctl ls` and `ctl show` escaped, so stored text
// cannot drive the operator's terminal; --json prints the same values as
// JSON, unchanged.
func TestE2ECtlEscapesStoredText(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	dir := t.TempDir()
	const title = "\x1b[31mred\r\x07title"
	const holder = "h\x1b]0;pwned\x07"
	code, out, errOut := runCtl(t, d.Socket, dir, "--json", "create", "--provider", "echo", "--title", title)
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	var s api.SessionInfo
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Title != title {
		t.Fatalf("create --json: %q %v", out, err)
	}
	c := d.Client(t)
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: holder}, nil); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ls"}, {"show", s.SessionID}} {
		code, out, errOut := runCtl(t, d.Socket, dir, args...)
		if code != 0 {
			t.Fatalf("%v: %d %s", args, code, errOut)
		}
		if strings.ContainsAny(out, "\x1b\r\x07") {
			t.Fatalf("%v prints raw control characters:\n%q", args, out)
		}
		if !strings.Contains(out, `\x1b[31mred\r\x07title`) || !strings.Contains(out, `h\x1b]0;pwned\x07`) {
			t.Fatalf("%v does not show the escaped title and holder:\n%s", args, out)
		}
	}
	code, out, _ = runCtl(t, d.Socket, dir, "--json", "ls")
	var l api.ListResult
	if err := json.Unmarshal([]byte(out), &l); code != 0 || err != nil || len(l.Sessions) != 1 ||
		l.Sessions[0].Title != title || l.Sessions[0].Holders[0] != holder {
		t.Fatalf("ls --json: %d %q %v", code, out, err)
	}
}
