package attention

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// hungInhibitor's Inhibit never answers: it returns only when its
// context ends (Close cancels it).
type hungInhibitor struct {
	entered chan struct{}
	left    chan error // why it returned
}

func (h *hungInhibitor) Name() string                { return "hung" }
func (h *hungInhibitor) Probe(context.Context) error { return nil }
func (h *hungInhibitor) Inhibit(ctx context.Context, _ string) (io.Closer, error) {
	h.entered <- struct{}{}
	<-ctx.Done()
	h.left <- ctx.Err()
	return nil, ctx.Err()
}

// hungDesktop's Notify never answers.
type hungDesktop struct {
	entered chan struct{}
	left    chan error
}

func (h *hungDesktop) Notify(ctx context.Context, _, _ string) error {
	select {
	case h.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	select {
	case h.left <- ctx.Err():
	default:
	}
	return ctx.Err()
}

// before receives from first, failing if other comes first.
func before[T, U any](t *testing.T, first <-chan T, other <-chan U, what string) T {
	t.Helper()
	select {
	case v := <-first:
		return v
	case <-other:
		t.Fatalf("%s: only after the hung call returned", what)
	}
	var zero T
	return zero
}

// TestHungInhibitHoldsNothing: an Inhibit that never answers delays no
// notice (of this session or any other), starts no second call while it
// runs, and Close ends it at once.
func TestHungInhibitHoldsNothing(t *testing.T) {
	h := &hungInhibitor{entered: make(chan struct{}, 8), left: make(chan error, 8)}
	var running atomic.Int32
	pub := make(chan api.AttentionNotice, 8)
	probed := make(chan struct{}, 1)
	var logs syncBuf
	a := New(Options{Inhibitor: h, Running: func() int { return int(running.Load()) },
		Publish: func(n api.AttentionNotice) { pub <- n },
		Logger:  slog.New(teeHandler{slog.NewTextHandler(&logs, nil), onMessage("sleep inhibitor probed", probed)})})
	a.Start()
	recv(t, probed, "the start's probe") // the turns below start the Inhibit call, not the probe's taker
	running.Store(2)
	a.Observe([]event.Event{ev("a", event.TurnStarted, nil), ev("a", event.ApprovalRequested, nil)})
	recv(t, h.entered, "Inhibit call")
	before(t, pub, h.left, "notice while Inhibit hangs")
	a.Observe([]event.Event{ev("b", event.TurnStarted, nil), ev("b", event.ApprovalRequested, nil)})
	if n := before(t, pub, h.left, "another session's notice while Inhibit hangs"); n.SessionID != "b" {
		t.Fatalf("notice %+v", n)
	}
	select {
	case <-h.entered:
		t.Fatal("a second Inhibit call while the first still runs")
	default:
	}
	a.Close() // returns only once the hung call has ended, cancelled
	select {
	case err := <-h.left:
		if err != context.Canceled {
			t.Fatalf("the hung Inhibit ended with %v, want cancelled by Close", err)
		}
	default:
		t.Fatal("Close returned with the Inhibit call still running")
	}
	if strings.Contains(logs.String(), "keep-awake unavailable") {
		t.Fatalf("Close's cancel logged as keep-awake unavailable:\n%s", logs.String())
	}
}

// TestHungDesktopHoldsNothing: a notification service that never
// answers delays neither the inhibitor's release nor the connections'
// notices; what it cannot take is dropped past maxPosts (logged once),
// and Close ends the post under way.
func TestHungDesktopHoldsNothing(t *testing.T) {
	f := newFake(nil)
	d := &hungDesktop{entered: make(chan struct{}, 1), left: make(chan error, 1)}
	var running atomic.Int32
	pub := make(chan api.AttentionNotice, 4*maxPosts)
	var logs syncBuf
	a := New(Options{Inhibitor: f, Desktop: d, Running: func() int { return int(running.Load()) },
		Publish: func(n api.AttentionNotice) { pub <- n }, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a.Start()
	running.Store(1)
	a.Observe([]event.Event{ev("a", event.TurnStarted, nil), ev("a", event.ApprovalRequested, nil)})
	recv(t, f.taken, "Inhibit")
	recv(t, pub, "notice")
	recv(t, d.entered, "Notify call")
	running.Store(0)
	a.Observe([]event.Event{ev("a", event.TurnCompleted, event.TurnCompletedData{Status: event.StatusCompleted})})
	before(t, f.released, d.left, "release while Notify hangs")
	before(t, pub, d.left, "notice while Notify hangs")
	for i := range 2 * maxPosts {
		a.Observe([]event.Event{ev("b", event.ApprovalRequested, event.ApprovalRequestedData{RequestID: string(rune('a' + i%26))})})
		before(t, pub, d.left, "notice while Notify hangs")
	}
	if n := strings.Count(logs.String(), "desktop notifications dropped"); n != 1 {
		t.Fatalf("dropping logged %d times, want once:\n%s", n, logs.String())
	}
	a.Close()
	if err := recv(t, d.left, "the hung Notify's end"); err != context.Canceled {
		t.Fatalf("the hung Notify ended with %v, want cancelled by Close", err)
	}
	if n := strings.Count(logs.String(), "desktop notification failed"); n > 1 {
		t.Fatalf("failure logged %d times, want at most once:\n%s", n, logs.String())
	}
}

// TestBody: a desktop notification's body is bounded and has no control
// characters; the freedesktop body is escaped for markup.
func TestBody(t *testing.T) {
	long := strings.Repeat("é", api.MaxTitleBytes/2)
	if b := body(api.AttentionNotice{Title: long}); len(b) > maxBodyBytes+len("…") || !strings.HasPrefix(long, strings.TrimSuffix(b, "…")) {
		t.Fatalf("body of a %d-byte title is %d bytes: %q", len(long), len(b), api.Prefix(b))
	}
	if b := body(api.AttentionNotice{Title: "a\x1b[31mb\u0085c\x7fd"}); b != "a [31mb c d" {
		t.Fatalf("body %q", b)
	}
	if got := markupEscaper.Replace(`<b>x</b> & "y"`); got != "&lt;b&gt;x&lt;/b&gt; &amp; &quot;y&quot;" {
		t.Fatalf("escaped %q", got)
	}
}

// TestSessionBusAddress: the session bus is $DBUS_SESSION_BUS_ADDRESS,
// else a socket at $XDG_RUNTIME_DIR/bus, else a clear error; the
// environment is left as it was (providers inherit it).
func TestSessionBusAddress(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", dir)
	if _, err := sessionBusAddress(); !errors.Is(err, ErrNoSessionBus) {
		t.Fatalf("no bus: %v, want ErrNoSessionBus", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bus"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sessionBusAddress(); !errors.Is(err, ErrNoSessionBus) {
		t.Fatalf("a regular file at bus: %v, want ErrNoSessionBus", err)
	}
	os.Remove(filepath.Join(dir, "bus"))
	l, err := net.Listen("unix", filepath.Join(dir, "bus"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, err := sessionBusAddress(); err != nil || got != "unix:path="+filepath.Join(dir, "bus") {
		t.Fatalf("socket at bus: %q, %v", got, err)
	}
	if v := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); v != "" {
		t.Fatalf("DBUS_SESSION_BUS_ADDRESS set to %q", v)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/elsewhere")
	if got, _ := sessionBusAddress(); got != "unix:path=/elsewhere" {
		t.Fatalf("explicit address: %q", got)
	}
	err = FreedesktopNotify{}.Notify(context.Background(), "s", "b")
	if err == nil || !strings.Contains(err.Error(), "session bus") {
		t.Fatalf("Notify on a missing bus: %v", err)
	}
}
