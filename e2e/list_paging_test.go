package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// createN creates n echo sessions and returns their ids in creation order.
func createN(t *testing.T, c *rpc.Client, n int, cwd string) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for range n {
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: cwd}, &s); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.SessionID)
	}
	return ids
}

// idsDiff describes where got and want part.
func idsDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d got %s, want %s (%d vs %d ids)", i, got[i], want[i], len(got), len(want))
		}
	}
	return fmt.Sprintf("%d ids, want %d", len(got), len(want))
}

func idsOf(ss []api.SessionInfo) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.SessionID
	}
	return out
}

// wantInvalidParams checks err is invalid_params naming field and saying want.
func wantInvalidParams(t *testing.T, what string, err error, field, want string) {
	t.Helper()
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "invalid_params" || re.Data["field"] != field || !strings.Contains(re.Message, want) {
		t.Fatalf("%s: %v (%+v); want invalid_params field %s saying %q", what, err, re, field, want)
	}
}

// TestE2EListPaging: agentSession.list answers pages, oldest first. A
// client that sends no params (an old one) gets the first 256 and a
// nextCursor; passing it back gives the rest and a null nextCursor. A
// cursor stays valid when its own session is deleted. limit past 4096, a
// string that is no cursor and a cursor of another daemon's state are
// invalid_params naming the field. `ctl ls` and `ctl doctor` page through
// every session.
func TestE2EListPaging(t *testing.T) {
	const n = api.DefaultListSessions + 44
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	cwd := t.TempDir()
	ids := createN(t, c, n, cwd)

	// An old client: no params member at all.
	nc, br := dialInit(t, d.Socket)
	fmt.Fprintf(nc, "%s\n", `{"jsonrpc":"2.0","id":2,"method":"agentSession.list"}`)
	line, err := br.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(line, &reply); err != nil {
		t.Fatalf("%v: %.200s", err, line)
	}
	var first api.ListResult
	raw, _ := json.Marshal(reply.Result)
	json.Unmarshal(raw, &first)
	if _, ok := reply.Result["nextCursor"]; !ok || first.NextCursor == nil || len(first.Sessions) != api.DefaultListSessions {
		t.Fatalf("no params: %d sessions, nextCursor %s; want %d and a cursor", len(first.Sessions), reply.Result["nextCursor"], api.DefaultListSessions)
	}
	var rest api.ListResult
	if err := c.Call(ctx10(t), "agentSession.list", api.ListParams{Cursor: *first.NextCursor}, &rest); err != nil {
		t.Fatal(err)
	}
	if rest.NextCursor != nil {
		t.Fatalf("last page has nextCursor %q", *rest.NextCursor)
	}
	if got := append(idsOf(first.Sessions), idsOf(rest.Sessions)...); strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Fatalf("two pages are not the sessions in creation order: %s", idsDiff(got, ids))
	}

	// A cursor whose session is deleted still places the next page.
	var p1 api.ListResult
	if err := c.Call(ctx10(t), "agentSession.list", api.ListParams{Limit: 10}, &p1); err != nil || p1.NextCursor == nil || len(p1.Sessions) != 10 {
		t.Fatalf("limit 10: %d sessions, %v", len(p1.Sessions), err)
	}
	if err := c.Call(ctx10(t), "agentSession.delete", api.SessionParams{SessionID: ids[9]}, nil); err != nil {
		t.Fatal(err)
	}
	var p2 api.ListResult
	if err := c.Call(ctx10(t), "agentSession.list", api.ListParams{Limit: 3, Cursor: *p1.NextCursor}, &p2); err != nil {
		t.Fatalf("cursor of a deleted session: %v", err)
	}
	if got := idsOf(p2.Sessions); strings.Join(got, " ") != strings.Join(ids[10:13], " ") {
		t.Fatalf("after the deleted cursor session: %v, want %v", got, ids[10:13])
	}
	ids = append(ids[:9:9], ids[10:]...)

	// Bad params name the field and the bound.
	for _, lim := range []int{api.MaxListSessions + 1, -1} {
		err := c.Call(ctx10(t), "agentSession.list", api.ListParams{Limit: lim}, nil)
		wantInvalidParams(t, fmt.Sprintf("limit %d", lim), err, "limit", fmt.Sprintf("0..%d", api.MaxListSessions))
	}
	err = c.Call(ctx10(t), "agentSession.list", api.ListParams{Cursor: "not-a-cursor"}, nil)
	wantInvalidParams(t, "a made-up cursor", err, "cursor", "not a cursor this daemon issued")
	err = c.Call(ctx10(t), "agentSession.list", api.ListParams{Cursor: strings.Repeat("c", api.MaxCursorBytes+1)}, nil)
	wantInvalidParams(t, "a long cursor", err, "cursor", fmt.Sprintf("limit of %d bytes", api.MaxCursorBytes))
	other := daemontest.Start(t, daemontest.Options{})
	oc := other.Client(t)
	createN(t, oc, 2, cwd)
	var op api.ListResult
	if err := oc.Call(ctx10(t), "agentSession.list", api.ListParams{Limit: 1}, &op); err != nil || op.NextCursor == nil {
		t.Fatalf("other daemon: %+v %v", op, err)
	}
	err = c.Call(ctx10(t), "agentSession.list", api.ListParams{Cursor: *op.NextCursor}, nil)
	wantInvalidParams(t, "another state's cursor", err, "cursor", "stale")
	if err := c.Call(ctx10(t), "daemon.status", nil, nil); err != nil {
		t.Fatalf("after the bad lists: %v", err)
	}

	// ctl pages through them all.
	code, out, errOut := runCtl(t, d.Socket, cwd, "--json", "ls")
	var ls api.ListResult
	if err := json.Unmarshal([]byte(out), &ls); code != 0 || err != nil || strings.Join(idsOf(ls.Sessions), " ") != strings.Join(ids, " ") {
		t.Fatalf("ctl ls --json: exit %d %v %q; %s", code, err, errOut, idsDiff(idsOf(ls.Sessions), ids))
	}
	code, out, errOut = runCtl(t, d.Socket, cwd, "ls")
	if rows := strings.Count(out, "\n") - 1; code != 0 || rows != len(ids) {
		t.Fatalf("ctl ls: exit %d %q; %d rows, want %d", code, errOut, rows, len(ids))
	}
	code, out, errOut = runCtl(t, d.Socket, cwd, "doctor")
	if want := fmt.Sprintf("%d sessions, 0 live", len(ids)); !strings.Contains(out, want) {
		t.Fatalf("ctl doctor: exit %d %q %q; want %q", code, out, errOut, want)
	}
}

// TestE2EListPagingChurn: a listing in pages of 7 while sessions are
// created and deleted between and during its calls lists every session
// that exists throughout exactly once, in order, and no session twice.
func TestE2EListPagingChurn(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	cwd := t.TempDir()
	ids := createN(t, c, 60, cwd)
	// Every third session is deleted while the listing runs; the rest
	// survive it.
	var doomed, survivors []string
	for i, id := range ids {
		if i%3 == 1 {
			doomed = append(doomed, id)
		} else {
			survivors = append(survivors, id)
		}
	}

	// Alongside: creates and deletes of its own, and of the doomed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	churn := d.Client(t)
	var wg sync.WaitGroup
	churned := make(chan int, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		n := 0
		defer func() { churned <- n }()
		for i := 0; ctx.Err() == nil; i++ {
			var s api.SessionInfo
			if churn.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: cwd}, &s) != nil {
				return
			}
			if i%2 == 0 && churn.Call(ctx, "agentSession.delete", api.SessionParams{SessionID: s.SessionID}, nil) != nil {
				return
			}
			n++
		}
	}()

	seen := map[string]int{}
	var listed []api.SessionInfo
	var p api.ListParams
	p.Limit = 7
	for page := 0; ; page++ {
		var r api.ListResult
		if err := c.Call(ctx10(t), "agentSession.list", p, &r); err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		for _, s := range r.Sessions {
			seen[s.SessionID]++
			listed = append(listed, s)
		}
		// Between pages: a doomed session behind the cursor and one ahead
		// of it go, and one more is made.
		if len(doomed) > 0 {
			for _, k := range []int{0, len(doomed) - 1} {
				if k < len(doomed) {
					if err := c.Call(ctx10(t), "agentSession.delete", api.SessionParams{SessionID: doomed[k]}, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(doomed) > 1 {
				doomed = doomed[1 : len(doomed)-1]
			} else {
				doomed = nil
			}
		}
		createN(t, c, 1, cwd)
		if r.NextCursor == nil {
			break
		}
		if page > 1000 {
			t.Fatal("the listing does not end")
		}
		p.Cursor = *r.NextCursor
	}
	cancel()
	wg.Wait()
	t.Logf("%d listed in pages of 7; %d concurrent creates alongside", len(listed), <-churned)
	for id, k := range seen {
		if k != 1 {
			t.Errorf("session %s listed %d times", id, k)
		}
	}
	for _, id := range survivors {
		if seen[id] != 1 {
			t.Errorf("surviving session %s listed %d times", id, seen[id])
		}
	}
	for i := 1; i < len(listed); i++ {
		a, b := listed[i-1], listed[i]
		if b.CreatedAt.Before(a.CreatedAt) || (b.CreatedAt.Equal(a.CreatedAt) && b.SessionID <= a.SessionID) {
			t.Errorf("out of order at %d: %s %s then %s %s", i, a.SessionID, a.CreatedAt, b.SessionID, b.CreatedAt)
		}
	}
}

// TestE2EListCursorSigned: a cursor carries a MAC under a key the daemon
// keeps in its store, so only a nextCursor passed back as it was places a
// page: the same cursor cut by a character or with a byte changed, and
// one made by hand from the state id and a session's key (the layout a
// reader could guess), are invalid_params; the kept cursor still places
// the next page after a restart on the same state directory.
func TestE2EListCursorSigned(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	cwd := t.TempDir()
	ids := createN(t, c, 6, cwd)
	var p1 api.ListResult
	if err := c.Call(ctx10(t), "agentSession.list", api.ListParams{Limit: 2}, &p1); err != nil || p1.NextCursor == nil {
		t.Fatalf("limit 2: %+v %v", p1, err)
	}
	cur := *p1.NextCursor
	flip := []byte(cur)
	flip[len(flip)/2] ^= 'A' ^ 'B'
	if flip[len(flip)/2] == cur[len(cur)/2] {
		t.Fatal("flip did not change the cursor")
	}
	var s2 api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: ids[1]}, &s2); err != nil {
		t.Fatal(err)
	}
	handMade := func(version string) string {
		raw := fmt.Sprintf("%s %s %d %s", version, d.StateID, s2.CreatedAt.UnixNano(), ids[1])
		return base64.RawURLEncoding.EncodeToString([]byte(raw))
	}
	for what, bad := range map[string]string{
		"cut by one character":   cur[:len(cur)-1],
		"cut by half":            cur[:len(cur)/2],
		"a byte changed":         string(flip),
		"hand-made (old layout)": handMade("l1"),
		"hand-made (no MAC)":     handMade("l2"),
		"hand-made (zero MAC)":   base64.RawURLEncoding.EncodeToString(append([]byte(fmt.Sprintf("l2 %s %d %s", d.StateID, s2.CreatedAt.UnixNano(), ids[1])), make([]byte, 16)...)),
	} {
		var r api.ListResult
		err := c.Call(ctx10(t), "agentSession.list", api.ListParams{Limit: 2, Cursor: bad}, &r)
		if err == nil {
			t.Errorf("cursor %s accepted: page %v", what, idsOf(r.Sessions))
			continue
		}
		wantInvalidParams(t, what, err, "cursor", "not a cursor this daemon issued")
	}

	// The kept cursor survives a restart on the same state.
	d.Stop()
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir})
	var p2 api.ListResult
	if err := d2.Client(t).Call(ctx10(t), "agentSession.list", api.ListParams{Limit: 2, Cursor: cur}, &p2); err != nil {
		t.Fatalf("kept cursor after a restart: %v", err)
	}
	if got := idsOf(p2.Sessions); strings.Join(got, " ") != strings.Join(ids[2:4], " ") {
		t.Fatalf("after a restart the kept cursor gives %v, want %v", got, ids[2:4])
	}
}
