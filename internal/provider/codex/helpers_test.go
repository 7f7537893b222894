package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider/echo"
	"github.com/sessiond/sessiond/internal/sysx"
)

const echoEnv = "ECHO_PROVIDER_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(echoEnv) == "1" {
		os.Exit(echo.Main(os.Args[1:], os.Stdin, os.Stdout))
	}
	goleak.VerifyTestMain(m)
}

// waitLong bounds every wait on a signal; tests never sleep to synchronise.
const waitLong = 20 * time.Second

var tagSeq atomic.Int64

// echoProc is a real echo provider child (the test binary re-executed).
type echoProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    io.ReadCloser
	stderr *syncBuffer
	tag    string
	exited chan struct{}
	err    error // Wait's result, valid after exited
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startEcho starts the echo provider with its threads under home. The child
// carries a test-unique SESSIOND_SESSION_ID; cleanup closes stdin, kills it
// if it lingers, and fails the test if any tagged process remains.
func startEcho(t testing.TB, home string, args ...string) *echoProc {
	t.Helper()
	tag := fmt.Sprintf("provtest-%d-%d", os.Getpid(), tagSeq.Add(1))
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), echoEnv+"=1", echo.HomeEnv+"="+home, "SESSIOND_SESSION_ID="+tag,
		"GORACE=atexit_sleep_ms=0") // the race runtime otherwise sleeps 1 s at exit
	sysx.Tie(cmd, syscall.SIGKILL)
	p := &echoProc{cmd: cmd, stderr: &syncBuffer{}, tag: tag, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	var err error
	if p.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if p.out, err = cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.in.Close()
		select {
		case <-p.exited:
		case <-time.After(waitLong):
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if pids := taggedPids(tag); len(pids) > 0 {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Errorf("processes with tag %s left behind: %v", tag, pids)
		}
	})
	return p
}

func (p *echoProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

func (p *echoProc) exitCode(t testing.TB) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(waitLong):
		t.Fatal("echo provider did not exit")
	}
	return p.cmd.ProcessState.ExitCode()
}

// taggedPids lists live processes whose environment carries our tag.
func taggedPids(tag string) []int {
	want := []byte("SESSIOND_SESSION_ID=" + tag + "\x00")
	paths, _ := filepath.Glob("/proc/[0-9]*/environ")
	var pids []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, want) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && bytes.Contains(st, []byte(") Z ")) {
			continue // a zombie is gone already
		}
		pids = append(pids, pid)
	}
	return pids
}

// recorder collects emitted events and wakes waiters on each.
type recorder struct {
	mu      sync.Mutex
	evs     []event.Draft
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) emit(d event.Draft) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, d)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) all() []event.Draft {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event.Draft(nil), r.evs...)
}

// waitForNth is waitFor for the n-th (1-based) matching event.
func (r *recorder) waitForNth(t testing.TB, typ, turn string, n int) event.Draft {
	t.Helper()
	deadline := time.After(waitLong)
	for {
		r.mu.Lock()
		seen := 0
		for _, d := range r.evs {
			if d.Type == typ && (turn == "" || d.TurnID == turn) {
				if seen++; seen == n {
					r.mu.Unlock()
					return d
				}
			}
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %d-th %s event for turn %q; got %s", n, typ, turn, typesOf(r.all()))
		}
	}
}

// waitFor blocks until an event of type typ (and turn, when not empty) was
// emitted and returns it.
func (r *recorder) waitFor(t testing.TB, typ, turn string) event.Draft {
	t.Helper()
	deadline := time.After(waitLong)
	for from := 0; ; {
		r.mu.Lock()
		for _, d := range r.evs[from:] {
			if d.Type == typ && (turn == "" || d.TurnID == turn) {
				r.mu.Unlock()
				return d
			}
		}
		from = len(r.evs)
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s event for turn %q; got %s", typ, turn, typesOf(r.all()))
		}
	}
}

func typesOf(ds []event.Draft) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Type)
	}
	return strings.Join(s, ",")
}

// countOf is how many drafts of type typ ds holds.
func countOf(ds []event.Draft, typ string) int {
	n := 0
	for _, d := range ds {
		if d.Type == typ {
			n++
		}
	}
	return n
}

// turnText joins the message.delta texts of a turn.
func turnText(ds []event.Draft, turn string) string {
	var b strings.Builder
	for _, d := range ds {
		if d.Type == event.MessageDelta && d.TurnID == turn {
			var dd event.DeltaData
			_ = json.Unmarshal(d.Data, &dd)
			b.WriteString(dd.Text)
		}
	}
	return b.String()
}

func decode[T any](t testing.TB, d event.Draft) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(d.Data, &v); err != nil {
		t.Fatalf("decode %s: %v", d.Type, err)
	}
	return v
}

// newEchoAdapter starts an echo child and an adapter on it (not Started).
func newEchoAdapter(t testing.TB, home, threadID string, args ...string) (*Adapter, *echoProc, *recorder) {
	t.Helper()
	p := startEcho(t, home, args...)
	rec := newRecorder()
	a := NewAdapter(Options{
		In: p.in, Out: p.out, Cwd: t.TempDir(), ThreadID: threadID, Emit: rec.emit,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	t.Cleanup(func() {
		_ = p.in.Close()
		select {
		case <-a.Done():
		case <-time.After(waitLong):
			t.Error("adapter reader did not finish after stdin closed")
			p.kill()
			<-a.Done()
		}
	})
	return a, p, rec
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

// threadLines counts the turn lines of a thread file in the echo home.
func threadTurns(t testing.TB, home, id string) int {
	t.Helper()
	f, err := os.Open(filepath.Join(home, id+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := -1 // header
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
	}
	return n
}

// checkDeltaParts fails unless every delta in ds carries its parts (the
// journal coalesces those without decoding them) and they agree with its
// data; it returns how many deltas it checked.
func checkDeltaParts(t testing.TB, ds []event.Draft) int {
	t.Helper()
	n := 0
	for _, d := range ds {
		if d.Type != event.MessageDelta && d.Type != event.ItemDelta {
			continue
		}
		n++
		dd := decode[event.ItemDeltaData](t, d) // a superset of DeltaData's fields
		if d.Delta == nil {
			t.Fatalf("%s %s was emitted without its parts (event.NewMessageDelta/NewItemDelta): the journal must decode it", d.Type, d.Data)
		}
		if *d.Delta != (event.DeltaParts{Text: dd.Text, ItemID: dd.ItemID, Stream: dd.Stream}) {
			t.Fatalf("%s parts %+v disagree with its data %s", d.Type, *d.Delta, d.Data)
		}
	}
	return n
}
