package echo

import (
	"bufio"
	"encoding/json"
	"io"
	"testing"
	"time"
)

// session runs Main in-process over pipes.
type session struct {
	t    *testing.T
	inW  *io.PipeWriter
	sc   *bufio.Scanner
	outR *io.PipeReader
	code chan int
	home string
}

func newSession(t *testing.T, args ...string) *session {
	t.Helper()
	home := t.TempDir()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, inW: inW, sc: bufio.NewScanner(outR), code: make(chan int, 1), home: home, outR: outR}
	s.sc.Buffer(make([]byte, 64<<10), 16<<20)
	go func() {
		code := Main(append([]string{"--home", home}, args...), inR, outW)
		_ = inR.Close() // like a process exiting: its stdin is gone
		_ = outW.Close()
		s.code <- code
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close() // unblocks a writer nobody reads any more
		<-s.code
	})
	return s
}

func (s *session) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.inW, line+"\n"); err != nil {
		s.t.Fatalf("write: %v", err)
	}
}

// next returns the next line the provider wrote, decoded.
func (s *session) next() map[string]any {
	s.t.Helper()
	if !s.sc.Scan() {
		s.t.Fatalf("provider output ended: %v", s.sc.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(s.sc.Bytes(), &m); err != nil {
		s.t.Fatalf("provider wrote unparseable %q", s.sc.Text())
	}
	if _, ok := m["jsonrpc"]; ok {
		s.t.Fatalf("provider wrote a jsonrpc field: %s", s.sc.Text())
	}
	return m
}

// until skips lines up to the first with the given method.
func (s *session) until(method string) map[string]any {
	s.t.Helper()
	for {
		if m := s.next(); m["method"] == method {
			return m
		}
	}
}

// exitCode waits for Main to return, discarding the rest of its output.
func (s *session) exitCode() int {
	s.t.Helper()
	go func() { _, _ = io.Copy(io.Discard, s.outR) }()
	select {
	case c := <-s.code:
		s.code <- c
		return c
	case <-time.After(waitLong):
		s.t.Fatal("Main did not return")
		return -1
	}
}

func (s *session) init() {
	s.t.Helper()
	s.send(`{"id":0,"method":"initialize","params":{"clientInfo":{"name":"t"}}}`)
	if r := s.next(); r["result"] == nil {
		s.t.Fatalf("initialize: %v", r)
	}
	s.send(`{"method":"initialized"}`)
}

func (s *session) startThread() string {
	s.t.Helper()
	s.send(`{"id":1,"method":"thread/start","params":{"cwd":"/tmp"}}`)
	r := s.next()
	id, _ := r["result"].(map[string]any)["thread"].(map[string]any)["id"].(string)
	if id == "" {
		s.t.Fatalf("thread/start: %v", r)
	}
	if n := s.next(); n["method"] != "thread/started" {
		s.t.Fatalf("want thread/started, got %v", n)
	}
	return id
}

func (s *session) turn(thread, text string) string {
	s.t.Helper()
	b, _ := json.Marshal(map[string]any{"id": 2, "method": "turn/start", "params": map[string]any{
		"threadId": thread, "input": []any{map[string]any{"type": "text", "text": text}}}})
	s.send(string(b))
	r := s.next()
	tu, _ := r["result"].(map[string]any)["turn"].(map[string]any)
	if tu["status"] != "inProgress" || tu["id"] == "" {
		s.t.Fatalf("turn/start: %v", r)
	}
	return tu["id"].(string)
}

func errOf(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("want an error, got %v", m)
	}
	return e
}
