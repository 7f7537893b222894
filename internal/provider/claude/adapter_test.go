package claude

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// A can_use_tool request is relayed with the kind of its tool, and each
// decision becomes the CLI's PermissionResult.
func TestApprovalKindsAndAnswers(t *testing.T) {
	cases := []struct {
		tool, kind, decision string
		check                func(t *testing.T, resp map[string]any)
	}{
		{"Bash", "command", "approve", func(t *testing.T, r map[string]any) {
			if r["behavior"] != "allow" || r["updatedInput"].(map[string]any)["command"] != "x" || r["updatedPermissions"] != nil {
				t.Fatalf("approve: %v", r)
			}
		}},
		{"Edit", "fileChange", "approveForSession", func(t *testing.T, r map[string]any) {
			perms, _ := r["updatedPermissions"].([]any)
			if r["behavior"] != "allow" || len(perms) != 1 || perms[0].(map[string]any)["destination"] != "session" {
				t.Fatalf("approveForSession: %v", r)
			}
		}},
		{"Write", "fileChange", "deny", func(t *testing.T, r map[string]any) {
			if r["behavior"] != "deny" || r["interrupt"] != nil {
				t.Fatalf("deny: %v", r)
			}
		}},
		{"NotebookEdit", "fileChange", "cancel", func(t *testing.T, r map[string]any) {
			if r["behavior"] != "deny" || r["interrupt"] != true {
				t.Fatalf("cancel: %v", r)
			}
		}},
		{"AskUserQuestion", "userInput", "approve", func(t *testing.T, r map[string]any) {
			in := r["updatedInput"].(map[string]any)
			if r["behavior"] != "allow" || in["answers"].(map[string]any)["Which?"] != "A, B" {
				t.Fatalf("answers: %v", r)
			}
		}},
		{"WebFetch", "toolCall", "approve", func(t *testing.T, r map[string]any) {
			if r["behavior"] != "allow" {
				t.Fatalf("toolCall: %v", r)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.tool+"/"+tc.decision, func(t *testing.T) {
			f := newFake(t, nil)
			f.started(t)
			f.send(t, map[string]any{"type": "control_request", "request_id": "req-9", "request": map[string]any{
				"subtype": "can_use_tool", "tool_name": tc.tool, "input": map[string]any{"command": "x"}, "tool_use_id": "toolu_9",
				"permission_suggestions": []any{map[string]any{"type": "addRules", "behavior": "allow", "destination": "localSettings",
					"rules": []any{map[string]any{"toolName": tc.tool}}}}}})
			req := decodeData[event.ApprovalRequestedData](t, f.next(t, event.ApprovalRequested))
			if req.Kind != tc.kind || req.RequestID != "req-9" || req.ItemID != "toolu_9" {
				t.Fatalf("approval.requested %+v, want kind %s", req, tc.kind)
			}
			wantOpts := "approve,approveForSession,deny,cancel"
			if tc.kind == "userInput" {
				wantOpts = "approve,deny,cancel"
			}
			if got := strings.Join(req.Options, ","); got != wantOpts {
				t.Fatalf("options %s, want %s", got, wantOpts)
			}
			err := f.a.Respond(t.Context(), "req-9", provider.Answer{Decision: tc.decision, Answers: map[string][]string{"Which?": {"A", "B"}}})
			if err != nil {
				t.Fatal(err)
			}
			m := f.read(t)
			resp := m["response"].(map[string]any)
			if m["type"] != "control_response" || resp["subtype"] != "success" || resp["request_id"] != "req-9" {
				t.Fatalf("wrote %v", m)
			}
			tc.check(t, resp["response"].(map[string]any))
			if res := decodeData[event.ApprovalResolvedData](t, f.next(t, event.ApprovalResolved)); res.Decision != tc.decision {
				t.Fatalf("approval.resolved %+v", res)
			}
		})
	}
}

// A control request we do not serve is answered at once with an error
// (the CLI never waits on it) and journaled as denied by the daemon.
func TestUnservedControlRequestAnswered(t *testing.T) {
	f := newFake(t, nil)
	f.started(t)
	f.send(t, map[string]any{"type": "control_request", "request_id": "req-h", "request": map[string]any{"subtype": "hook_callback", "callback_id": "cb"}})
	m := f.read(t)
	resp := m["response"].(map[string]any)
	if m["type"] != "control_response" || resp["subtype"] != "error" || resp["request_id"] != "req-h" || !strings.Contains(resp["error"].(string), "hook_callback") {
		t.Fatalf("wrote %v", m)
	}
	res := decodeData[event.ApprovalResolvedData](t, f.next(t, event.ApprovalResolved))
	if res.RequestID != "req-h" || res.Decision != "deny" || res.By != "daemon" {
		t.Fatalf("approval.resolved %+v", res)
	}
}

// Non-JSON lines and unknown message types break nothing: an unknown type
// is one provider.notice and one warning however often it comes; a type
// on the ignore list is neither; the turn still ends with its result.
func TestBadInput(t *testing.T) {
	f := newFake(t, nil)
	f.started(t)
	for range 3 {
		f.send(t, "not json at all")
		f.send(t, map[string]any{"type": "brand_new_thing"})
		f.send(t, map[string]any{"type": "keep_alive"})
	}
	f.send(t, map[string]any{"type": "result", "subtype": "success", "is_error": false, "usage": map[string]any{"input_tokens": 1, "output_tokens": 2}})
	var notices int
	for {
		d := <-f.evs
		if d.Type == event.ProviderNotice {
			notices++
			if n := decodeData[event.NoticeData](t, d); !strings.Contains(n.Message, "brand_new_thing") {
				t.Fatalf("notice %+v", n)
			}
		}
		if d.Type == event.TurnCompleted {
			break
		}
	}
	if notices != 1 {
		t.Fatalf("%d notices for one unknown type, want 1", notices)
	}
	if n := strings.Count(f.log(), "level=WARN"); n != 2 {
		t.Fatalf("%d warnings, want 2 (one per anomaly kind):\n%s", n, f.log())
	}
}

// A resume the CLI refuses with "No conversation found" is
// ErrThreadNotFound with the CLI's wording; any other early result fails
// Start without it.
func TestResumeNotFound(t *testing.T) {
	for _, msg := range []string{"No conversation found with session ID: old-1", "something else broke"} {
		f := newFake(t, func(o *provider.Options) { o.ThreadID = "old-1" })
		done := make(chan error, 1)
		go func() { _, err := f.a.Start(t.Context()); done <- err }()
		f.read(t) // initialize
		f.send(t, map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true, "errors": []string{msg}})
		_ = f.outW.Close()
		err := <-done
		var nf *provider.NotFoundError
		notFound := errors.As(err, &nf)
		if want := strings.HasPrefix(msg, "No conversation"); notFound != want || !errors.Is(err, provider.ErrThreadNotFound) != !want {
			t.Fatalf("%q: Start = %v", msg, err)
		}
		if notFound && nf.Cause != msg {
			t.Fatalf("cause %q", nf.Cause)
		}
	}
}

// Every message type of the SDK's union is mapped, ignored or a notice.
func TestSDKMessageUnionCovered(t *testing.T) {
	fh, err := os.Open("../../../testdata/claude/sdk-messages.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	n := 0
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		n++
		typ, sub, _ := strings.Cut(l, "/")
		if typ == "system" {
			_, ig := systemIgnored[sub]
			_, no := systemNotices[sub]
			if !ig && !no && !systemMapped[sub] {
				t.Errorf("system/%s is in no table", sub)
			}
			continue
		}
		_, ig := typeIgnored[typ]
		_, no := typeNotices[typ]
		if !ig && !no && !typeMapped[typ] {
			t.Errorf("%s is in no table", typ)
		}
	}
	if n < 30 {
		t.Fatalf("read %d types", n)
	}
}

// A line over the cap is dropped with a provider.notice; the next line is
// read as usual.
func TestLineTooLong(t *testing.T) {
	f := newFake(t, func(o *provider.Options) { o.MaxLineBytes = 1024 })
	f.started(t)
	f.send(t, `{"type":"keep_alive","pad":"`+strings.Repeat("x", 4096)+`"}`)
	n := decodeData[event.NoticeData](t, f.next(t, event.ProviderNotice))
	if n.Code != "line_too_long" || n.Level != "warning" {
		t.Fatalf("notice %+v", n)
	}
	f.send(t, map[string]any{"type": "result", "subtype": "success"})
	f.next(t, event.TurnCompleted)
}

// TestRequestIDsPrefixedAndDuplicatesRefused: the requestId clients see is
// the host's per-child prefix + the CLI's request_id (an answer meant for
// an earlier child's request that reused the id never reaches this one),
// the control_response names the CLI's own id, and a second open request
// with the same id is refused (an error response and one notice, never an
// approval.resolved under the open one's requestId) while the first stays
// open and answerable.
func TestRequestIDsPrefixedAndDuplicatesRefused(t *testing.T) {
	f := newFake(t, func(o *provider.Options) { o.RequestIDPrefix = "f2-" })
	f.started(t)
	ask := func(cmd string) {
		f.send(t, map[string]any{"type": "control_request", "request_id": "r1", "request": map[string]any{
			"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{"command": cmd}, "tool_use_id": "toolu_" + cmd}})
	}
	ask("a")
	if req := decodeData[event.ApprovalRequestedData](t, f.next(t, event.ApprovalRequested)); req.RequestID != "f2-r1" {
		t.Fatalf("approval.requested %+v, want requestId f2-r1", req)
	}
	ask("b")
	m := f.read(t)
	if resp := m["response"].(map[string]any); resp["subtype"] != "error" || resp["request_id"] != "r1" {
		t.Fatalf("duplicate request answered %v, want an error response", m)
	}
	if n := decodeData[event.NoticeData](t, f.next(t, event.ProviderNotice)); n.Code != "duplicate_request_id" {
		t.Fatalf("duplicate noticed %+v", n)
	}
	if err := f.a.Respond(t.Context(), "r1", provider.Answer{Decision: "approve"}); !errors.Is(err, provider.ErrRequestNotFound) {
		t.Fatalf("answer by the CLI's bare id: %v, want request not found", err)
	}
	if err := f.a.Respond(t.Context(), "f2-r1", provider.Answer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	m = f.read(t)
	resp := m["response"].(map[string]any)
	if resp["subtype"] != "success" || resp["request_id"] != "r1" || resp["response"].(map[string]any)["updatedInput"].(map[string]any)["command"] != "a" {
		t.Fatalf("wrote %v, want the first request approved under the CLI's id", m)
	}
}

// TestBadSessionIDNeverRecorded: a session id that could not go back to
// the CLI as `--resume ID` (too long for argv, or read as a flag) is never
// recorded as the thread; a sane one is.
func TestBadSessionIDNeverRecorded(t *testing.T) {
	learned := make(chan string, 8)
	f := newFake(t, func(o *provider.Options) { o.OnThreadID = func(id string) { learned <- id } })
	f.started(t) // its init names sess-1
	for _, id := range []string{strings.Repeat("a", 300), "--dangerously-skip-permissions", "sess 2", "sess-3_ok.x"} {
		f.send(t, map[string]any{"type": "system", "subtype": "init", "session_id": id})
	}
	f.send(t, map[string]any{"type": "result", "subtype": "success", "session_id": "sess-3_ok.x"})
	f.next(t, event.TurnCompleted)
	var got []string
	for len(learned) > 0 {
		got = append(got, <-learned)
	}
	if strings.Join(got, ",") != "sess-1,sess-3_ok.x" {
		t.Fatalf("recorded thread ids %q, want only sess-1 and sess-3_ok.x", got)
	}
}
