package echo

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// homeSession runs Main in-process on an existing home (a second process
// of the same provider home).
func homeSession(t *testing.T, home string) *session {
	t.Helper()
	s := newSession(t, "--home", home) // the later --home wins
	return s
}

// answer skips notifications up to the response to id.
func (s *session) answer(id int) map[string]any {
	s.t.Helper()
	for {
		if m := s.next(); m["id"] == float64(id) {
			return m
		}
	}
}

func (s *session) request(id int, method string, params map[string]any) {
	s.t.Helper()
	b, _ := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	s.send(string(b))
}

// TestManyThreadsOneProcess: like codex, one process serves many
// threads: turns on two threads run at once, every notification names
// its thread, thread/unsubscribe stops a thread's events (the thread
// stays loaded), and a second process cannot load a thread the first
// has loaded until the first exits (the writer lock).
func TestManyThreadsOneProcess(t *testing.T) {
	s := newSession(t)
	s.init()
	a := s.startThread()
	b := s.startThread()
	s.request(10, "turn/start", map[string]any{"threadId": a, "input": []any{map[string]any{"type": "text", "text": "slow /sleep 600000"}}})
	var turnA string
	for turnA == "" {
		if m := s.next(); m["id"] == float64(10) {
			turnA = m["result"].(map[string]any)["turn"].(map[string]any)["id"].(string)
		}
	}
	s.request(11, "turn/start", map[string]any{"threadId": b, "input": []any{map[string]any{"type": "text", "text": "fast"}}})
	// b's turn completes while a's runs: they are parallel.
	for done := false; !done; {
		m := s.next()
		p, _ := m["params"].(map[string]any)
		if m["method"] != nil && m["method"] != "thread/started" {
			th, _ := p["threadId"].(string)
			if th != a && th != b {
				t.Fatalf("notification without its thread: %v", m)
			}
			if m["method"] == "turn/completed" {
				if th != b {
					t.Fatalf("turn/completed of %s first, want b's (a sleeps): %v", th, m)
				}
				done = true
			}
			if m["method"] == "item/agentMessage/delta" && th == b && !strings.Contains("echo: fast", p["delta"].(string)) {
				t.Fatalf("b's delta %v", p)
			}
		}
	}
	// Unsubscribe b: its events stop; its turn is still accepted.
	s.request(12, "thread/unsubscribe", map[string]any{"threadId": b})
	if r := s.answer(12); r["result"].(map[string]any)["status"] != "unsubscribed" {
		t.Fatalf("unsubscribe %v", r)
	}
	s.request(13, "thread/unsubscribe", map[string]any{"threadId": b})
	if r := s.answer(13); r["result"].(map[string]any)["status"] != "notSubscribed" {
		t.Fatalf("second unsubscribe %v", r)
	}
	s.request(14, "thread/unsubscribe", map[string]any{"threadId": "thr_none"})
	if r := s.answer(14); r["result"].(map[string]any)["status"] != "notLoaded" {
		t.Fatalf("unsubscribe unknown %v", r)
	}
	s.request(15, "turn/start", map[string]any{"threadId": b, "input": []any{map[string]any{"type": "text", "text": "muted"}}})
	if r := s.answer(15); r["result"] == nil {
		t.Fatalf("turn on an unsubscribed thread %v", r)
	}
	// A second process on the same home: a's writer lock is held.
	s2 := homeSession(t, s.home)
	s2.init()
	s2.request(1, "thread/resume", map[string]any{"threadId": b})
	if e := errOf(t, s2.next()); !strings.Contains(e["message"].(string), "already has an active writer") {
		t.Fatalf("resume of a thread loaded elsewhere: %v", e)
	}
	// Interrupt a; nothing of b (muted) comes before a's completion.
	s.request(16, "turn/interrupt", map[string]any{"threadId": a, "turnId": turnA})
	for {
		m := s.next()
		if p, _ := m["params"].(map[string]any); p != nil && p["threadId"] == b {
			t.Fatalf("an unsubscribed thread's event was sent: %v", m)
		}
		if m["method"] == "turn/completed" {
			break
		}
	}
	// The first process exits: the lock is gone, the thread resumes.
	_ = s.inW.Close()
	go func() { _, _ = io.Copy(io.Discard, s.outR) }()
	if c := s.exitCode(); c != 0 {
		t.Fatalf("exit %d", c)
	}
	s2.request(2, "thread/resume", map[string]any{"threadId": b})
	if r := s2.next(); r["result"] == nil {
		t.Fatalf("resume after the holder exited: %v", r)
	}
}
