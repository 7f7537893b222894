package attention

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeInhibitor hands out closers that report their Close on released.
type fakeInhibitor struct {
	err      error
	calls    atomic.Int32
	tried    chan struct{} // one per Inhibit call, failed or not
	taken    chan string   // why, per Inhibit
	released chan struct{} // one send per Close
}

func (f *fakeInhibitor) Name() string                { return "fake" }
func (f *fakeInhibitor) Probe(context.Context) error { return f.err }
func (f *fakeInhibitor) Inhibit(_ context.Context, why string) (io.Closer, error) {
	f.calls.Add(1)
	f.tried <- struct{}{}
	if f.err != nil {
		return nil, f.err
	}
	f.taken <- why
	return closerFunc(func() error { f.released <- struct{}{}; return nil }), nil
}

type closerFunc func() error

func (c closerFunc) Close() error { return c() }

func newFake(err error) *fakeInhibitor {
	return &fakeInhibitor{err: err, tried: make(chan struct{}, 64), taken: make(chan string, 8), released: make(chan struct{}, 8)}
}

func ev(id, typ string, data any) event.Event {
	b, _ := json.Marshal(data)
	return event.Event{SessionID: id, Type: typ, Data: b, At: time.Unix(1, 0)}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
	var zero T
	return zero
}

// TestKindOf: which events call for the user.
func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   event.Event
		want string
	}{
		{"completed", ev("s", event.TurnCompleted, event.TurnCompletedData{Status: event.StatusCompleted}), api.AttentionTurnCompleted},
		{"failed", ev("s", event.TurnCompleted, event.TurnCompletedData{Status: event.StatusFailed, Reason: event.ReasonProviderError}), api.AttentionTurnFailed},
		{"crashed", ev("s", event.TurnCompleted, event.TurnCompletedData{Status: event.StatusInterrupted, Reason: event.ReasonProviderExited}), api.AttentionTurnFailed},
		{"cancelled", ev("s", event.TurnCompleted, event.TurnCompletedData{Status: event.StatusInterrupted, Reason: event.ReasonUserCancel}), ""},
		{"shutdown", ev("s", event.TurnCompleted, event.TurnCompletedData{Status: event.StatusInterrupted, Reason: event.ReasonShutdown}), ""},
		{"approval", ev("s", event.ApprovalRequested, event.ApprovalRequestedData{RequestID: "r"}), api.AttentionApprovalRequested},
		{"started", ev("s", event.TurnStarted, event.TurnStartedData{TurnID: "t"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kindOf(tc.ev); got != tc.want {
				t.Fatalf("kindOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCloseReleases: Close releases a held inhibitor (a shutdown that
// ends with turns still counted), and Observe after Close does nothing.
func TestCloseReleases(t *testing.T) {
	f := newFake(nil)
	var running atomic.Int32
	pub := make(chan api.AttentionNotice, 8)
	kept := make(chan struct{}, 1)
	a := New(Options{Inhibitor: f, Running: func() int { return int(running.Load()) },
		Publish: func(n api.AttentionNotice) { pub <- n }, Logger: slog.New(onMessage("keeping the machine awake", kept))})
	a.Start()
	running.Store(1)
	a.Observe([]event.Event{ev("s", event.TurnStarted, event.TurnStartedData{TurnID: "t"}),
		ev("s", event.ApprovalRequested, event.ApprovalRequestedData{RequestID: "r"})})
	if why := recv(t, f.taken, "Inhibit"); why != "1 agent turn(s) running" {
		t.Fatalf("why %q", why)
	}
	recv(t, pub, "notice")
	recv(t, kept, "the inhibitor held")
	if st := a.Status(); !st.KeepAwake.Held || !st.KeepAwake.Active || st.Notify != NotifyNone {
		t.Fatalf("status %+v", st)
	}
	a.Close()
	recv(t, f.released, "release at Close")
	a.Observe([]event.Event{ev("s", event.TurnStarted, nil)})
	if st := a.Status(); st.KeepAwake.Held {
		t.Fatalf("status %+v after Close", st)
	}
}

// TestUnavailableLoggedOnce: an inhibitor that cannot be had is logged
// once however many turns start, reported in Status, and tried again
// only retryAfter after its last failure (turns in between cost no call).
func TestUnavailableLoggedOnce(t *testing.T) {
	var logs syncBuf
	f := newFake(errors.New("no logind here"))
	var running atomic.Int32
	var clock atomic.Int64 // seconds
	pub := make(chan api.AttentionNotice, 8)
	probed := make(chan struct{}, 1)
	text := slog.NewTextHandler(&logs, nil)
	a := New(Options{Inhibitor: f, Running: func() int { return int(running.Load()) },
		Publish: func(n api.AttentionNotice) { pub <- n },
		Logger:  slog.New(teeHandler{text, onMessage("sleep inhibitor probed", probed)})})
	a.now = func() time.Time { return time.Unix(clock.Load(), 0) }
	a.Start()
	defer a.Close()
	recv(t, probed, "the start's probe") // failed: the clock starts
	busy := func() {
		running.Store(1)
		a.Observe([]event.Event{ev("s", event.TurnStarted, nil), ev("s", event.ApprovalRequested, nil)})
		recv(t, pub, "notice")
		running.Store(0)
		a.Observe([]event.Event{ev("s", event.TurnCompleted, event.TurnCompletedData{Status: event.StatusCompleted})})
		recv(t, pub, "notice")
	}
	for round := range 3 {
		busy() // within retryAfter of the last failure: no call
		if n := f.calls.Load(); n != int32(round) {
			t.Fatalf("round %d: %d Inhibit calls within retryAfter of a failure, want %d", round, n, round)
		}
		clock.Add(int64(retryAfter / time.Second))
		busy() // retryAfter on: one call
		recv(t, f.tried, "Inhibit call retryAfter after the failure")
	}
	if n := strings.Count(logs.String(), "keep-awake unavailable"); n != 1 {
		t.Fatalf("logged %d times:\n%s", n, logs.String())
	}
	if st := a.Status(); st.KeepAwake.Active || st.KeepAwake.Reason != "no logind here" {
		t.Fatalf("status %+v", st)
	}
}

// teeHandler hands each record to both handlers.
type teeHandler struct{ a, b slog.Handler }

func (h teeHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.a.Enabled(ctx, r.Level) {
		h.a.Handle(ctx, r)
	}
	return h.b.Handle(ctx, r)
}
func (h teeHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h teeHandler) WithGroup(string) slog.Handler      { return h }

// TestKeepAwakeOff: without an inhibitor Status says keep_awake = false.
func TestKeepAwakeOff(t *testing.T) {
	a := New(Options{})
	a.Start()
	defer a.Close()
	if st := a.Status(); st.KeepAwake.Active || st.KeepAwake.Reason != "keep_awake = false" {
		t.Fatalf("status %+v", st)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// onMessage is a slog handler that signals ch on each record whose
// message is msg.
func onMessage(msg string, ch chan<- struct{}) slog.Handler { return msgHandler{msg, ch} }

type msgHandler struct {
	msg string
	ch  chan<- struct{}
}

func (h msgHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h msgHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h msgHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h msgHandler) WithGroup(string) slog.Handler      { return h }
