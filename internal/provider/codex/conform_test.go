package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/clitest"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// lineTap splits a byte stream into lines and checks each.
type lineTap struct {
	mu      sync.Mutex
	partial []byte
	check   func([]byte) error
	skip    func([]byte) bool // lines not checked (nil: none)
	fail    func(string)
	side    string
}

func (lt *lineTap) feed(b []byte) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.partial = append(lt.partial, b...)
	for {
		i := bytes.IndexByte(lt.partial, '\n')
		if i < 0 {
			return
		}
		l := append([]byte(nil), lt.partial[:i]...)
		lt.partial = lt.partial[i+1:]
		if !json.Valid(bytes.TrimSpace(l)) {
			continue // codex's own log lines on stdout are not protocol
		}
		if lt.skip != nil && lt.skip(l) {
			continue
		}
		if err := lt.check(l); err != nil {
			lt.fail(fmt.Sprintf("%s %s\n  %v", lt.side, truncate(l, 400), err))
		}
	}
}

type checkedWriter struct {
	io.WriteCloser
	t *lineTap
}

func (w checkedWriter) Write(p []byte) (int, error) { w.t.feed(p); return w.WriteCloser.Write(p) }

type checkedReader struct {
	io.Reader
	t *lineTap
}

func (r checkedReader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	r.t.feed(p[:n])
	return n, err
}

// conformance wires an adapter's stdio through schema checks.
type conformance struct {
	mu   sync.Mutex
	errs []string
	in   *lineTap
	out  *lineTap
}

func newConformance(t *testing.T) *conformance {
	c := codextest.NewConformance(t)
	cf := &conformance{}
	cf.in = &lineTap{check: c.Client, fail: cf.add, side: "client wrote"}
	cf.out = &lineTap{check: c.Server, fail: cf.add, side: "server wrote"}
	return cf
}

// add records a failure (both taps' goroutines call it).
func (cf *conformance) add(e string) {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	cf.errs = append(cf.errs, e)
}

func (cf *conformance) report(t *testing.T) {
	t.Helper()
	cf.mu.Lock()
	defer cf.mu.Unlock()
	for _, e := range cf.errs {
		t.Error(e)
	}
}

// startCodex runs the pinned codex app-server under home with an adapter
// whose traffic cf checks.
func startCodex(t *testing.T, home, threadID string, cf *conformance) (*Adapter, *recorder, func()) {
	cmd := exec.Command(codextest.Binary(t), "app-server")
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "HOME="+t.TempDir())
	cmd.Dir = t.TempDir()
	in, out := clitest.Start(t, cmd)
	rec := newRecorder()
	a := NewAdapter(Options{In: checkedWriter{in, cf.in}, Out: checkedReader{out, cf.out}, Cwd: cmd.Dir, ThreadID: threadID,
		Emit: rec.emit, RequestTimeout: waitLong})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			in.Close() // stdin EOF: codex's graceful stop
			<-a.Done()
			cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return a, rec, stop
}

// TestCodexConformance: every line the adapter writes to the real codex
// and every line codex writes back in a session (start, a command approved,
// a command declined, an interrupt, a resume) is valid under the pinned
// binary's generated schema. A codex upgrade that changes a shape the
// adapter sends or reads turns this red.
func TestCodexConformance(t *testing.T) {
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	m := codextest.NewModel(t,
		codextest.Exec("c1", "echo one"), codextest.Text("ran ", "it"),
		codextest.Exec("c2", "echo two"), codextest.Text("skipped"),
		codextest.Reply{Stall: stall})
	home := codextest.Home(t, m.URL, "")
	cf := newConformance(t)
	t.Cleanup(func() { cf.report(t) })
	a, rec, stop := startCodex(t, home, "", cf)
	ctx := testCtx(t)
	res, err := a.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, dec := range []string{DecisionApprove, DecisionDeny} {
		turn := fmt.Sprintf("t_%d", i+1)
		if err := a.StartTurn(ctx, turn, "run a command"); err != nil {
			t.Fatal(err)
		}
		req := decode[event.ApprovalRequestedData](t, rec.waitFor(t, event.ApprovalRequested, turn))
		if err := a.Respond(ctx, req.RequestID, Answer{Decision: dec}); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, event.TurnCompleted, turn)
	}
	if err := a.StartTurn(ctx, "t_3", "think"); err != nil {
		t.Fatal(err)
	}
	for range 5 { // two per command turn, then the stalled one
		select {
		case <-m.Arrived():
		case <-ctx.Done():
			t.Fatal("no model request")
		}
	}
	if ok, err := a.Interrupt(ctx); err != nil || !ok {
		t.Fatalf("interrupt %v %v", ok, err)
	}
	rec.waitFor(t, event.TurnCompleted, "t_3")

	// A second process resumes the thread (codex refuses a thread another
	// live process still writes: the first one stops first).
	stop()
	b, _, _ := startCodex(t, home, res.ThreadID, cf)
	if r, err := b.Start(ctx); err != nil || !r.Resumed {
		t.Fatalf("resume %+v %v", r, err)
	}
}

// TestEchoConformance: the echo provider claims codex v2's shapes; every
// line of its /work, /ask and /approve turns, both ways, is valid under
// the pinned codex's schema.
func TestEchoConformance(t *testing.T) {
	cf := newConformance(t)
	t.Cleanup(func() { cf.report(t) })
	// Echo's handshake and thread objects are the subset the adapter reads
	// (codex's carry many more fields); its turn traffic is checked whole.
	cf.out.skip = func(l []byte) bool {
		var m message
		_ = json.Unmarshal(l, &m)
		switch {
		case m.Method == "":
			return !strings.Contains(string(l), `"turn"`) || strings.Contains(string(l), `"thread"`)
		case m.Method == "thread/started":
			return true
		}
		return false
	}
	p := startEcho(t, t.TempDir())
	rec := newRecorder()
	a := NewAdapter(Options{In: checkedWriter{p.in, cf.in}, Out: checkedReader{p.out, cf.out}, Cwd: "/work/project", Emit: rec.emit})
	ctx := testCtx(t)
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"/work 3", "/ask", "/approve"} {
		turn := fmt.Sprintf("t_%d", i+1)
		if err := a.StartTurn(ctx, turn, text); err != nil {
			t.Fatal(err)
		}
		req := decode[event.ApprovalRequestedData](t, rec.waitFor(t, event.ApprovalRequested, turn))
		if err := a.Respond(ctx, req.RequestID, Answer{Decision: DecisionApprove, Answers: map[string][]string{"q1": {"hello"}}}); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, event.TurnCompleted, turn)
	}
	_ = p.in.Close()
	<-a.Done()
}

// TestAnswersConform: every answer the adapter can write — each option of
// each relayed kind, each refusal — is valid under the response type
// codex's schema gives its request.
func TestAnswersConform(t *testing.T) {
	c := codextest.NewConformance(t)
	params := map[string]string{
		"item/permissions/requestApproval": `{"threadId":"t","turnId":"u","itemId":"i","cwd":"/","startedAtMs":1,"permissions":{"network":{"enabled":true}}}`,
	}
	n := 0
	check := func(method string, answer []byte) {
		t.Helper()
		n++
		id := fmt.Sprint(n)
		req := fmt.Sprintf(`{"id":%s,"method":%q,"params":%s}`, id, method, orDefault(params[method], `{}`))
		_ = c.Server([]byte(req)) // registers the id; its params are not what is checked here
		if err := c.Client([]byte(fmt.Sprintf(`{"id":%s,%s}`, id, answer))); err != nil {
			t.Errorf("%s: %s: %v", method, answer, err)
		}
	}
	for method, r := range requestRelayed {
		for _, opt := range r.options {
			ap := &approval{kind: r.kind, params: []byte(orDefault(params[method], `{}`))}
			ans := Answer{Decision: opt, Answers: map[string][]string{"q1": {"yes"}}, Content: json.RawMessage(`{"name":"x"}`)}
			b, _ := json.Marshal(wireAnswer(ap, ans))
			check(method, []byte(`"result":`+string(b)))
		}
	}
	for method, rf := range requestRefused {
		var b []byte
		if rf.err != nil {
			e, _ := json.Marshal(rf.err)
			b = []byte(`"error":` + string(e))
		} else {
			r, _ := json.Marshal(rf.result)
			b = []byte(`"result":` + string(r))
		}
		check(method, b)
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
