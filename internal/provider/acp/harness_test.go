package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/testkit/acptest"
)

func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv(fakeEnv); ok {
		runFakeAgent(mode)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// agent is a fake ACP agent process with an adapter on its stdio; every
// line either side writes is kept (and checked against the ACP schema).
type agent struct {
	a     *Adapter
	cmd   *exec.Cmd
	evs   chan event.Draft
	mu    sync.Mutex
	sent  [][]byte // what the adapter wrote
	read  [][]byte // what the agent wrote
	logs  bytes.Buffer
	check func(dir string, line []byte) error
	// lax: the test feeds the adapter messages that break the schema on
	// purpose; the agent's side is not held to it (the adapter's is).
	lax     bool
	opts    provider.Options // what the adapter was built with
	wrote   chan struct{}    // a token each time the adapter wrote a line
	badSent []string         // schema errors of the adapter's lines
	badRead []string         // schema errors of the agent's lines
	parent  *agent           // a thread of a shared runtime: the process's recorder
}

func (g *agent) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.logs.Write(p)
}

func (g *agent) log() string {
	if g.parent != nil {
		return g.parent.log()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.logs.String()
}

// tapIn records the adapter's lines to the agent.
type tapIn struct {
	g *agent
	w *os.File
}

func (t tapIn) Write(p []byte) (int, error) {
	t.g.record(&t.g.sent, acptest.Client, p)
	select {
	case t.g.wrote <- struct{}{}:
	default:
	}
	return t.w.Write(p)
}

func (t tapIn) Close() error { return t.w.Close() }

func (t tapIn) SetWriteDeadline(d time.Time) error { return t.w.SetWriteDeadline(d) }

func (g *agent) record(dst *[][]byte, dir string, p []byte) {
	for _, l := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		l = append([]byte(nil), l...)
		g.mu.Lock()
		*dst = append(*dst, l)
		g.mu.Unlock()
		if g.check != nil && len(l) > 0 && l[0] == '{' {
			if err := g.check(dir, l); err != nil {
				g.mu.Lock()
				if dir == acptest.Client {
					g.badSent = append(g.badSent, err.Error())
				} else {
					g.badRead = append(g.badRead, err.Error())
				}
				g.mu.Unlock()
			}
		}
	}
}

// startAgent runs the fake agent in mode and builds an adapter over it.
func startAgent(t *testing.T, mode string, mod func(*provider.Options, *Profile)) *agent {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeEnv+"="+mode)
	dieWithTest(cmd)
	return startCmd(t, cmd, mod)
}

// startCmd runs cmd (an ACP agent) and builds an adapter over it.
func startCmd(t *testing.T, cmd *exec.Cmd, mod func(*provider.Options, *Profile)) *agent {
	t.Helper()
	g := &agent{evs: make(chan event.Draft, 1<<16), check: conformance(t), cmd: cmd, wrote: make(chan struct{}, 1)}
	in, out := g.spawn(t, func() { g.a.BeginStop() }, func() <-chan struct{} { return g.a.Done() })
	o := provider.Options{In: in, Out: out, Cwd: t.TempDir(), Emit: func(d event.Draft) { g.evs <- d },
		Logger: slog.New(slog.NewTextHandler(g, &slog.HandlerOptions{Level: slog.LevelDebug})), RequestTimeout: 10 * time.Second,
		RequestIDPrefix: "f1-"}
	p := Profile{}
	if mod != nil {
		mod(&o, &p)
	}
	g.opts = o
	g.a = NewAdapter(o, p)
	return g
}

// spawn starts g.cmd with its stdio on real pipes (a child's are: writes
// can time out, reads can be paused), every line either side writes
// recorded and checked against the schema; the test's cleanup calls stop,
// kills the agent and waits for done.
func (g *agent) spawn(t *testing.T, stop func(), done func() <-chan struct{}) (tapIn, *os.File) {
	t.Helper()
	g.cmd.Stderr = os.Stderr
	inR, in, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	g.cmd.Stdin = inR
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := g.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	copied := make(chan struct{})
	go func() { // the agent's stdout, recorded line by line on its way to the adapter
		defer close(copied)
		br := bufio.NewReader(stdout)
		for {
			l, err := br.ReadBytes('\n')
			if len(l) > 0 {
				g.record(&g.read, acptest.Agent, l)
				if _, werr := outW.Write(l); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		outW.Close()
	}()
	t.Cleanup(func() {
		stop()
		_ = in.Close()
		_ = g.cmd.Process.Kill()
		_ = g.cmd.Wait()
		<-copied
		_ = outR.Close()
		<-done()
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, e := range g.badSent {
			t.Errorf("the adapter wrote a message outside the ACP schema: %s", e)
		}
		for _, e := range g.badRead {
			if !g.lax {
				t.Errorf("the fake agent wrote a message outside the ACP schema: %s", e)
			}
		}
	})
	return tapIn{g, in}, outR
}

// start runs Start and fails the test on an error.
func (g *agent) start(t *testing.T) provider.StartResult {
	t.Helper()
	res, err := g.a.Start(t.Context())
	if err != nil {
		t.Fatalf("start: %v\nlog:\n%s", err, g.log())
	}
	return res
}

// turn starts a turn and returns its events up to turn.completed.
func (g *agent) turn(t *testing.T, id, text string) []event.Draft {
	t.Helper()
	if err := g.a.StartTurn(t.Context(), id, text); err != nil {
		t.Fatal(err)
	}
	return g.until(t, event.TurnCompleted)
}

// until collects events up to and including the first of type typ.
func (g *agent) until(t *testing.T, typ string) []event.Draft {
	t.Helper()
	var out []event.Draft
	timeout := time.After(20 * time.Second)
	for {
		select {
		case d := <-g.evs:
			out = append(out, d)
			if d.Type == typ {
				return out
			}
		case <-timeout:
			t.Fatalf("no %s; got %s\nlog:\n%s", typ, types(out), g.log())
		}
	}
}

func types(ds []event.Draft) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Type
	}
	return strings.Join(s, ",")
}

func of(ds []event.Draft, typ string) []event.Draft {
	var out []event.Draft
	for _, d := range ds {
		if d.Type == typ {
			out = append(out, d)
		}
	}
	return out
}

func data[T any](t *testing.T, d event.Draft) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(d.Data, &v); err != nil {
		t.Fatalf("%s %s: %v", d.Type, d.Data, err)
	}
	return v
}

// sentMethod returns the params of every message the adapter sent with method.
func (g *agent) sentLines() []map[string]any {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []map[string]any
	for _, l := range g.sent {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func (g *agent) sentMethod(method string) []map[string]any {
	var out []map[string]any
	for _, m := range g.sentLines() {
		if m["method"] == method {
			p, _ := m["params"].(map[string]any)
			out = append(out, p)
		}
	}
	return out
}
