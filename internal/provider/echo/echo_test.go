package echo

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/budget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitLong = 20 * time.Second

func TestRequestsBeforeInitialize(t *testing.T) {
	s := newSession(t)
	s.send(`{"id":1,"method":"thread/start","params":{}}`)
	if e := errOf(t, s.next()); e["code"] != float64(codeInvalidRequest) {
		t.Fatalf("error %v", e)
	}
	s.send(`garbage that is not json`)
	s.init()
	s.send(`{"id":"x","method":"initialize","params":{}}`)
	if r := s.next(); r["id"] != "x" || errOf(t, r)["message"] != "Already initialized" {
		t.Fatalf("second initialize %v", r)
	}
	s.send(`{"id":9,"method":"no/such","params":{}}`)
	if e := errOf(t, s.next()); e["code"] != float64(codeMethodNotFound) {
		t.Fatalf("unknown method %v", e)
	}
	_ = s.inW.Close()
	if c := s.exitCode(); c != 0 {
		t.Fatalf("exit %d", c)
	}
}

func TestResumeUnknownThread(t *testing.T) {
	s := newSession(t)
	s.init()
	s.send(`{"id":1,"method":"thread/resume","params":{"threadId":"thr_gone"}}`)
	got := errOf(t, s.next())
	want := map[string]any{"code": float64(-32600), "message": "no rollout found for thread id thr_gone",
		"data": map[string]any{"type": "threadNotFound"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("error %v, want %v", got, want)
	}
}

func TestTurnWireAndHistory(t *testing.T) {
	s := newSession(t)
	s.init()
	th := s.startThread()
	tu := s.turn(th, "hi there")
	var methods []string
	var text strings.Builder
	for {
		m := s.next()
		methods = append(methods, m["method"].(string))
		p := m["params"].(map[string]any)
		if m["method"] == "item/agentMessage/delta" {
			if p["threadId"] != th || p["turnId"] != tu || p["itemId"] == "" {
				t.Fatalf("delta params %v", p)
			}
			text.WriteString(p["delta"].(string))
		}
		if m["method"] == "item/completed" && p["item"].(map[string]any)["text"] != "echo: hi there" {
			t.Fatalf("item/completed %v", p)
		}
		if m["method"] == "turn/completed" {
			if tt := p["turn"].(map[string]any); tt["id"] != tu || tt["status"] != "completed" || p["threadId"] != th {
				t.Fatalf("turn/completed %v", p)
			}
			break
		}
	}
	if got := strings.Join(methods, ","); got != "turn/started,item/started,item/agentMessage/delta,item/agentMessage/delta,item/agentMessage/delta,item/completed,turn/completed" {
		t.Fatalf("methods %s", got)
	}
	if text.String() != "echo: hi there" {
		t.Fatalf("deltas %q", text.String())
	}
	b, err := os.ReadFile(filepath.Join(s.home, th+".jsonl"))
	if err != nil || strings.Count(string(b), "\n") != 2 || !strings.Contains(string(b), `"answer":"echo: hi there"`) {
		t.Fatalf("thread file %q %v", b, err)
	}
	// the same process resumes its thread and sees the history
	s.send(`{"id":5,"method":"thread/resume","params":{"threadId":"` + th + `"}}`)
	r := s.next()
	if turns := r["result"].(map[string]any)["thread"].(map[string]any)["turns"].([]any); len(turns) != 1 {
		t.Fatalf("resume turns %v", turns)
	}
}

func TestInterruptAndRefusals(t *testing.T) {
	s := newSession(t)
	s.init()
	th := s.startThread()
	s.send(`{"id":3,"method":"turn/interrupt","params":{"threadId":"` + th + `","turnId":"nope"}}`)
	errOf(t, s.next())
	s.send(`{"id":4,"method":"turn/start","params":{"threadId":"thr_unloaded","input":[]}}`)
	errOf(t, s.next())
	tu := s.turn(th, "/sleep 600000")
	s.until("item/started")
	s.send(`{"id":2,"method":"turn/start","params":{"threadId":"` + th + `","input":[{"type":"text","text":"x"}]}}`)
	errOf(t, s.next())
	s.send(`{"id":3,"method":"turn/interrupt","params":{"threadId":"` + th + `","turnId":"` + tu + `"}}`)
	if r := s.next(); r["id"] != float64(3) || r["error"] != nil {
		t.Fatalf("interrupt answer %v (must come before turn/completed)", r)
	}
	p := s.until("turn/completed")["params"].(map[string]any)
	if p["turn"].(map[string]any)["status"] != "interrupted" {
		t.Fatalf("turn/completed %v", p)
	}
}

func TestApprovalDecisions(t *testing.T) {
	for _, decision := range []string{"accept", "decline"} {
		t.Run(decision, func(t *testing.T) {
			s := newSession(t)
			s.init()
			th := s.startThread()
			s.turn(th, "do it /approve")
			req := s.until("item/commandExecution/requestApproval")
			if req["id"] == nil || req["params"].(map[string]any)["command"] == nil {
				t.Fatalf("request %v", req)
			}
			b, _ := json.Marshal(map[string]any{"id": req["id"], "result": map[string]any{"decision": decision}})
			s.send(string(b))
			want := "echo: do it /approve"
			if decision == "decline" {
				want = "declined"
			}
			if got := s.until("item/completed")["params"].(map[string]any)["item"].(map[string]any)["text"]; got != want {
				t.Fatalf("answer %q, want %q", got, want)
			}
			if st := s.until("turn/completed")["params"].(map[string]any)["turn"].(map[string]any)["status"]; st != "completed" {
				t.Fatalf("status %v", st)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		text string // a turn to run first, if any
		want int
	}{
		{name: "eof mid-turn", text: "/sleep 600000", want: exitOK},
		{name: "crash", text: "/crash", want: exitCrashed},
		{name: "exit at start", args: []string{"--exit-at-start"}, want: exitUsage},
		{name: "bad flag", args: []string{"--no-such-flag"}, want: exitUsage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, tc.args...)
			if tc.text != "" {
				s.init()
				s.turn(s.startThread(), tc.text)
				s.until("item/started")
				if tc.want == exitOK {
					_ = s.inW.Close()
				}
			}
			if c := s.exitCode(); c != tc.want {
				t.Fatalf("exit %d, want %d", c, tc.want)
			}
		})
	}
}

func TestParseDirectives(t *testing.T) {
	tests := []struct {
		text string
		want directives
	}{
		{"plain", directives{}},
		{"/sleep 250 then", directives{sleep: 250 * time.Millisecond}},
		{"/sleep x", directives{}},
		{"/sleep 9223372036854775807", directives{sleep: budget.Max}},
		{"/flood 3", directives{floodN: 3, floodBytes: 8}},
		{"/flood 3 100 /crash", directives{floodN: 3, floodBytes: 100, crash: true}},
		{"/approve /orphan /forget", directives{approve: true, orphan: true, forget: true}},
	}
	for _, tc := range tests {
		if got := parseDirectives(tc.text); got != tc.want {
			t.Errorf("%q: %+v, want %+v", tc.text, got, tc.want)
		}
	}
	if got := strings.Join(splitAnswer("echo: abc"), "|"); got != "ech|o: |abc" {
		t.Errorf("split %q", got)
	}
}
