package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/frametest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var framings = []Framing{FramingLines, FramingHeader}

// logRec records log lines so tests can check a fault was logged once.
type logRec struct {
	mu    sync.Mutex
	lines []string
	warn  chan string
}

func newLogRec() *logRec { return &logRec{warn: make(chan string, 256)} }

func (l *logRec) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRec) WithAttrs(as []slog.Attr) slog.Handler    { return &logWith{l, as} }
func (l *logRec) WithGroup(string) slog.Handler            { return l }
func (l *logRec) Handle(_ context.Context, r slog.Record) error {
	return l.handle(r, nil)
}

func (l *logRec) handle(r slog.Record, pre []slog.Attr) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	for _, a := range pre {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	if r.Level >= slog.LevelInfo {
		select {
		case l.warn <- b.String():
		default:
		}
	}
	return nil
}

// count returns how many lines contain every one of subs.
func (l *logRec) count(subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, line := range l.lines {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		n++
	}
	return n
}

// waitFor blocks until n lines at info level or above hold every sub.
func (l *logRec) waitFor(t *testing.T, n int, subs ...string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for l.count(subs...) < n {
		select {
		case <-l.warn:
		case <-timeout:
			t.Fatalf("no log line with %q", subs)
		}
	}
}

type logWith struct {
	l  *logRec
	as []slog.Attr
}

func (w *logWith) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWith) WithAttrs(as []slog.Attr) slog.Handler {
	return &logWith{w.l, append(append([]slog.Attr{}, w.as...), as...)}
}
func (w *logWith) WithGroup(string) slog.Handler { return w }
func (w *logWith) Handle(_ context.Context, r slog.Record) error {
	return w.l.handle(r, w.as)
}

type testServer struct {
	srv  *Server
	path string
	fake *fakeBackend
	logs *logRec
}

func startServer(t *testing.T, fake *fakeBackend, tweak func(*ServerOptions)) *testServer {
	return startServerTB(t, fake, tweak)
}

func startServerTB(t testing.TB, fake *fakeBackend, tweak func(*ServerOptions)) *testServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "run", "s.sock")
	logs := newLogRec()
	log := slog.New(logs)
	l, err := Listen(path, log)
	if err != nil {
		t.Fatal(err)
	}
	o := ServerOptions{Backend: fake, MaxMessageBytes: 4096, WriteTimeout: 5 * time.Second,
		Version: "test", Socket: path, StateDir: dir, StateID: "st1", StartedAt: time.Now(), Logger: log}
	if tweak != nil {
		tweak(&o)
	}
	s := NewServer(o)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{srv: s, path: path, fake: fake, logs: logs}
}

func (ts *testServer) client(t *testing.T, f Framing, caps []string, skipInit bool) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, ts.path, ClientOptions{Name: "test", Framing: f, Capabilities: caps, SkipInitialize: skipInit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func call(t *testing.T, c *Client, method string, params, result any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Call(ctx, method, params, result)
}

// raw is a hand-framed connection, independent of the server's codec.
type raw struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
	f  Framing
}

func (ts *testServer) raw(t *testing.T, f Framing) *raw {
	t.Helper()
	nc, err := net.Dial("unix", ts.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &raw{t: t, nc: nc, br: bufio.NewReader(nc), f: f}
}

func (r *raw) write(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.nc, s); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *raw) send(msg string) {
	r.t.Helper()
	r.write(frametest.Frame(msg, r.f == FramingHeader))
}

func (r *raw) initialize() {
	r.t.Helper()
	r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.attach.v1","agent-session.structured.hold.v1"]}}`)
	if m := r.recv(); m["result"] == nil {
		r.t.Fatalf("initialize: %v", m)
	}
}

// recv reads one message; it fails the test on EOF or after 10 s.
func (r *raw) recv() map[string]any {
	r.t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.recvRaw()), &m); err != nil {
		r.t.Fatalf("bad message: %v", err)
	}
	return m
}

// recvRaw reads one message's bytes.
func (r *raw) recvRaw() string {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	body, err := frametest.Read(r.br, r.f == FramingHeader)
	if err != nil {
		r.t.Fatal(err)
	}
	return string(body)
}

// expectClosed reads until the server closes; no message may arrive.
func (r *raw) expectClosed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := r.br.ReadByte()
	if err == nil {
		rest, _ := r.br.Peek(r.br.Buffered())
		r.t.Fatalf("got %q%q, want the connection closed", b, rest)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscallECONNRESET) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			r.t.Fatal("connection still open after 10 s")
		}
	}
}
