package codex

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

func TestHandshakeMessages(t *testing.T) {
	f := newFake(t, nil)
	go func() { _, _ = f.a.Start(testCtx(t)) }()
	m := f.expect(t, "initialize")
	p := m["params"].(map[string]any)
	ci := p["clientInfo"].(map[string]any)
	if ci["name"] != "sessiond" || ci["title"] != "sessiond" || ci["version"] == "" {
		t.Fatalf("clientInfo %v", ci)
	}
	if caps := p["capabilities"].(map[string]any); caps["experimentalApi"] != false {
		t.Fatalf("capabilities %v", caps)
	}
	f.reply(t, m, map[string]any{"userAgent": "x"})
	if n := f.expect(t, "initialized"); n["id"] != nil {
		t.Fatalf("initialized must be a notification: %v", n)
	}
	ts := f.expect(t, "thread/start")
	if ts["params"].(map[string]any)["cwd"] != "/work" {
		t.Fatalf("thread/start %v", ts)
	}
	f.reply(t, ts, map[string]any{"thread": map[string]any{"id": "thr_1"}})
}

func TestResumeFailures(t *testing.T) {
	tests := []struct {
		name     string
		err      map[string]any
		replaced bool
	}{
		{name: "typed threadNotFound", err: map[string]any{"code": -32600, "message": "whatever", "data": map[string]any{"type": "threadNotFound"}}, replaced: true},
		{name: "no rollout found", err: map[string]any{"code": -32603, "message": "no rollout found for thread id thr_old"}, replaced: true},
		{name: "not found", err: map[string]any{"code": -32600, "message": "thread not found"}, replaced: true},
		{name: "other failure", err: map[string]any{"code": -32603, "message": "disk on fire"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(o *Options) { o.ThreadID = "thr_old" })
			type out struct {
				r   StartResult
				err error
			}
			ch := make(chan out, 1)
			go func() { r, err := f.a.Start(testCtx(t)); ch <- out{r, err} }()
			f.reply(t, f.expect(t, "initialize"), map[string]any{})
			f.expect(t, "initialized")
			m := f.expect(t, "thread/resume")
			if m["params"].(map[string]any)["threadId"] != "thr_old" {
				t.Fatalf("resume %v", m)
			}
			f.send(t, map[string]any{"id": m["id"], "error": tc.err})
			if tc.replaced {
				f.reply(t, f.expect(t, "thread/start"), map[string]any{"thread": map[string]any{"id": "thr_new"}})
			}
			o := <-ch
			if !tc.replaced {
				var re *RPCError
				if !errors.As(o.err, &re) || !strings.Contains(o.err.Error(), "thr_old") {
					t.Fatalf("start: %v, want the provider error naming thr_old", o.err)
				}
				if f.a.ThreadID() != "" || len(f.rec.all()) != 0 {
					t.Fatalf("thread %q, events %s after a failed resume", f.a.ThreadID(), typesOf(f.rec.all()))
				}
				select {
				case b := <-f.lines:
					t.Fatalf("adapter sent %s after a failed resume", b)
				default:
				}
				return
			}
			if o.err != nil || o.r.Replaced == nil || o.r.ThreadID != "thr_new" || o.r.Resumed {
				t.Fatalf("start %+v %v", o.r, o.err)
			}
			got := decode[event.ThreadReplacedData](t, f.rec.waitFor(t, event.ProviderThreadReplace, ""))
			if got.OldThreadID != "thr_old" || got.NewThreadID != "thr_new" || got.Cause != tc.err["message"] {
				t.Fatalf("thread_replaced %+v", got)
			}
		})
	}
}

func TestGarbageKeepsSessionWorking(t *testing.T) {
	f := newFake(t, func(o *Options) { o.MaxLineBytes = 1024 })
	f.handshake(t)
	long := `{"method":"item/agentMessage/delta","params":{"delta":"` + strings.Repeat("y", 64<<10) + `"}}`
	for range 2 { // twice: each anomaly kind is logged at warn level once
		f.send(t, "this is not json")
		f.send(t, "{")
		f.send(t, "")
		f.send(t, long)
		f.send(t, map[string]any{"id": 999, "result": map[string]any{}})
		f.send(t, map[string]any{"method": "codex/somethingNew", "params": map[string]any{"x": 1}})
	}
	f.send(t, map[string]any{"id": "srv-1", "method": "codex/unknownRequest", "params": map[string]any{}})
	ans := f.expect(t, "")
	if ans["id"] != "srv-1" || ans["error"].(map[string]any)["code"] != float64(-32601) {
		t.Fatalf("answer to unknown request %v", ans)
	}
	// A request the schema lists but nobody can answer gets the safe refusal.
	f.send(t, map[string]any{"id": 3, "method": "item/tool/call", "params": map[string]any{}})
	ans = f.expect(t, "")
	if ans["id"] != float64(3) || ans["result"].(map[string]any)["success"] != false {
		t.Fatalf("answer to item/tool/call %v", ans)
	}
	f.startTurn(t, "t_1", "pt_1")
	f.send(t, map[string]any{"method": "item/agentMessage/delta", "params": map[string]any{"threadId": "thr_1", "turnId": "pt_1", "itemId": "i", "delta": "ok"}})
	f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": "thr_1", "turn": map[string]any{"id": "pt_1", "status": "completed"}}})
	f.rec.waitFor(t, event.TurnCompleted, "t_1")
	// One notice per dropped long line (data lost), one for the unknown
	// notification method (once per method).
	if got := typesOf(f.rec.all()); got != "provider.notice,provider.notice,provider.notice,approval.resolved,approval.resolved,message.delta,turn.completed" {
		t.Fatalf("events %s", got)
	}
	if n := decode[event.NoticeData](t, f.rec.all()[0]); n.Code != "line_too_long" || n.Level != "warning" {
		t.Fatalf("first notice %+v, want the dropped line", n)
	}
	logs := f.logs.String()
	for _, kind := range []string{"unparseable_line", "line_too_long", "response_unknown_id", "unknown_notification", "unknown_request"} {
		if n := strings.Count(logs, "level=WARN msg=\"provider protocol anomaly\" kind="+kind); n != 1 {
			t.Errorf("kind %s logged at warn %d times, want once\n%s", kind, n, logs)
		}
	}
}

func TestTurnEndings(t *testing.T) {
	type msg = map[string]any
	tests := []struct {
		name    string
		notes   []msg
		want    event.TurnCompletedData
		deltaOK bool
	}{
		{
			name:  "failed with error object",
			notes: []msg{{"method": "turn/completed", "params": msg{"threadId": "thr_1", "turn": msg{"id": "pt", "status": "failed", "error": msg{"message": "model overloaded"}}}}},
			want:  event.TurnCompletedData{Status: "failed", Reason: "provider_error", ProviderTurnID: "pt", Error: "model overloaded"},
		},
		{
			name: "retrying error does not end the turn",
			notes: []msg{
				{"method": "error", "params": msg{"threadId": "thr_1", "turnId": "pt", "error": msg{"message": "reconnecting"}, "willRetry": true}},
				{"method": "turn/completed", "params": msg{"threadId": "thr_1", "turn": msg{"id": "pt", "status": "completed"}}},
			},
			want: event.TurnCompletedData{Status: "completed", ProviderTurnID: "pt"},
		},
		{
			name: "final error, then the turn's own turn/completed",
			notes: []msg{
				{"method": "error", "params": msg{"threadId": "thr_1", "turnId": "pt", "error": msg{"message": "quota"}, "willRetry": false}},
				{"method": "turn/completed", "params": msg{"threadId": "thr_1", "turn": msg{"id": "pt", "status": "failed"}}},
			},
			want: event.TurnCompletedData{Status: "failed", Reason: "provider_error", ProviderTurnID: "pt", Error: "quota"},
		},
		{
			name:  "interrupted by the provider itself",
			notes: []msg{{"method": "turn/completed", "params": msg{"threadId": "thr_1", "turn": msg{"id": "pt", "status": "interrupted"}}}},
			want:  event.TurnCompletedData{Status: "interrupted", ProviderTurnID: "pt"},
		},
		{
			name: "events of another turn are dropped",
			notes: []msg{
				{"method": "item/agentMessage/delta", "params": msg{"threadId": "thr_1", "turnId": "other", "delta": "stale"}},
				{"method": "turn/completed", "params": msg{"threadId": "thr_1", "turn": msg{"id": "other", "status": "completed"}}},
				{"method": "turn/completed", "params": msg{"threadId": "thr_1", "turn": msg{"id": "pt", "status": "completed"}}},
			},
			want: event.TurnCompletedData{Status: "completed", ProviderTurnID: "pt"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, nil)
			f.handshake(t)
			f.startTurn(t, "t_1", "pt")
			for _, n := range tc.notes {
				f.send(t, n)
			}
			got := decode[event.TurnCompletedData](t, f.rec.waitFor(t, event.TurnCompleted, "t_1"))
			if got != tc.want {
				t.Fatalf("turn.completed %+v, want %+v", got, tc.want)
			}
			want := "turn.completed"
			if tc.name == "retrying error does not end the turn" {
				want = "provider.notice,turn.completed" // the retry is a notice
			}
			if got := typesOf(f.rec.all()); got != want {
				t.Fatalf("events %s, want %s", got, want)
			}
			if f.a.Busy() {
				t.Fatal("busy after the turn ended")
			}
		})
	}
}

func TestWriteToDeadProviderIsExited(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outW.Close()
	a := NewAdapter(Options{In: w, Out: outR})
	defer func() { _ = outR.Close(); <-a.Done() }()
	if _, err := a.Start(testCtx(t)); !errors.Is(err, ErrExited) {
		t.Fatalf("start: %v, want ErrExited", err)
	}
	_ = w.Close()
}

func TestInterruptRacingCompletion(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	type out struct {
		ok  bool
		err error
	}
	ch := make(chan out, 1)
	go func() { ok, err := f.a.Interrupt(testCtx(t)); ch <- out{ok, err} }()
	m := f.expect(t, "turn/interrupt")
	if p := m["params"].(map[string]any); p["threadId"] != "thr_1" || p["turnId"] != "pt" {
		t.Fatalf("turn/interrupt params %v", p)
	}
	f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"turn": map[string]any{"id": "pt", "status": "completed"}}})
	f.send(t, map[string]any{"id": m["id"], "error": map[string]any{"code": -32600, "message": "no active turn to interrupt"}})
	if o := <-ch; o.ok || o.err != nil {
		t.Fatalf("interrupt after completion: %v %v, want false, nil", o.ok, o.err)
	}
	// completed on its own: no user_cancel
	got := decode[event.TurnCompletedData](t, f.rec.waitFor(t, event.TurnCompleted, "t_1"))
	if got.Status != event.StatusCompleted || got.Reason != "" {
		t.Fatalf("turn.completed %+v", got)
	}
}
