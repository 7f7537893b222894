// Package providertest drives sessions of a real provider CLI through the
// real daemon (internal/testkit/daemontest) for the real-provider end-to-end tests
// (claudetest, codextest): a client whose events feed a queue, a session
// created, attached and held, the calls a test makes on it, and the checks
// both providers' tests share (no protocol anomaly, no process left). What
// a provider's CLI needs (its command line, environment, scripted model)
// and what its scenarios expect stay in its own package. Import it only
// from _test.go files.
package providertest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// WaitLong bounds each wait on the real binary (a loaded CI machine).
const WaitLong = 60 * time.Second

// Ctx is a context of WaitLong, cancelled with the test.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), WaitLong)
	t.Cleanup(cancel)
	return ctx
}

// Daemon starts sessiond with the given [providers.NAME] tables (a
// start_timeout of 60s for a CLI's slow first start); stateDir "" is a
// fresh state dir, a used one a restart.
func Daemon(t testing.TB, stateDir string, providers ...string) *daemontest.Daemon {
	cfg := "start_timeout = \"60s\"\n" + strings.Join(providers, "\n")
	return daemontest.Start(t, daemontest.Options{Config: cfg, StateDir: stateDir})
}

// feed is one client's event stream.
type feed struct {
	mu  sync.Mutex
	evs []event.Event
	ch  chan event.Event
}

func (f *feed) onNotify(method string, p json.RawMessage) {
	var n api.EventNotice
	if method != rpc.NotifyEvent || json.Unmarshal(p, &n) != nil {
		return
	}
	f.mu.Lock()
	f.evs = append(f.evs, n.Event)
	f.mu.Unlock()
	f.ch <- n.Event
}

// Session is one session driven through the daemon's socket by a client
// of its own. ID is empty until Create; Hold is the last hold's result.
type Session struct {
	D    *daemontest.Daemon
	C    *rpc.Client
	ID   string
	Hold api.HoldResult
	f    *feed
}

// Dial connects a client named client to d; the events it is sent feed
// the returned Session (Next, Events).
func Dial(t testing.TB, d *daemontest.Daemon, client string) *Session {
	f := &feed{ch: make(chan event.Event, 1<<16)}
	c, err := rpc.Dial(Ctx(t), d.Socket, rpc.ClientOptions{Name: client, OnNotify: f.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &Session{D: d, C: c, f: f}
}

// NewSession creates a session of provider in cwd through a new client,
// attaches and holds it.
func NewSession(t testing.TB, d *daemontest.Daemon, client, provider, cwd string) *Session {
	t.Helper()
	s := Dial(t, d, client)
	var info api.SessionInfo
	if err := s.C.Call(Ctx(t), "agentSession.create", api.CreateParams{Provider: provider, Cwd: cwd}, &info); err != nil {
		t.Fatal(err)
	}
	s.ID = info.SessionID
	s.AttachAndHold(t)
	return s
}

// Reopen attaches to and holds session id on d (a restarted daemon)
// through a new client.
func Reopen(t testing.TB, d *daemontest.Daemon, client, id string) *Session {
	t.Helper()
	s := Dial(t, d, client)
	s.ID = id
	s.AttachAndHold(t)
	return s
}

// AttachAndHold attaches after the last event seen and holds the session
// (holder "e2e"), keeping the result in Hold.
func (s *Session) AttachAndHold(t testing.TB) {
	t.Helper()
	if err := s.C.Call(Ctx(t), "agentSession.attach", api.AttachParams{SessionID: s.ID, AfterSeq: s.lastSeq()}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.C.Call(Ctx(t), "agentSession.hold", api.HoldParams{SessionID: s.ID, HolderID: "e2e"}, &s.Hold); err != nil {
		t.Fatalf("hold: %v\n%s", err, s.D.Log.String())
	}
}

func (s *Session) lastSeq() uint64 {
	evs := s.Events()
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// Next returns the next event of type typ, skipping others, failing after
// WaitLong.
func (s *Session) Next(t testing.TB, typ string) event.Event {
	t.Helper()
	timeout := time.After(WaitLong)
	for {
		select {
		case ev := <-s.f.ch:
			if ev.Type == typ {
				return ev
			}
		case <-timeout:
			log := s.D.Log.String()
			if len(log) > 8<<10 {
				log = log[len(log)-8<<10:]
			}
			t.Fatalf("no %s event; saw %s\nthe daemon's log, last 8 KiB:\n%s", typ, s.Types(), log)
		}
	}
}

// Types are the types of the events received so far, comma-separated.
func (s *Session) Types() string {
	var types []string
	for _, ev := range s.Events() {
		types = append(types, ev.Type)
	}
	return strings.Join(types, ",")
}

// Events are the events received so far.
func (s *Session) Events() []event.Event {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return append([]event.Event(nil), s.f.evs...)
}

// Send starts a turn with text and returns its id.
func (s *Session) Send(t testing.TB, text string) string {
	t.Helper()
	var r api.SendResult
	if err := s.C.Call(Ctx(t), "agentSession.send", api.SendParams{SessionID: s.ID, Text: text}, &r); err != nil {
		t.Fatal(err)
	}
	return r.TurnID
}

// Respond answers approval requestID with decision.
func (s *Session) Respond(t testing.TB, requestID, decision string) {
	t.Helper()
	if err := s.C.Call(Ctx(t), "agentSession.respond", api.RespondParams{SessionID: s.ID, RequestID: requestID, Decision: decision}, nil); err != nil {
		t.Fatal(err)
	}
}

// Cancel cancels the running turn, failing unless one was cancelled.
func (s *Session) Cancel(t testing.TB) {
	t.Helper()
	var cr struct {
		Cancelled bool `json:"cancelled"`
	}
	if err := s.C.Call(Ctx(t), "agentSession.cancel", map[string]string{"sessionId": s.ID}, &cr); err != nil || !cr.Cancelled {
		t.Fatalf("cancel %+v %v", cr, err)
	}
}

// Close closes the session.
func (s *Session) Close(t testing.TB) {
	t.Helper()
	var cr api.CloseResult
	if err := s.C.Call(Ctx(t), "agentSession.close", api.SessionParams{SessionID: s.ID}, &cr); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// ReadAll reads the session's whole journal.
func (s *Session) ReadAll(t testing.TB) []event.Event {
	t.Helper()
	var r struct {
		Events []event.Event `json:"events"`
	}
	if err := s.C.Call(Ctx(t), "agentSession.read", map[string]any{"sessionId": s.ID, "afterSeq": 0, "limit": 4096}, &r); err != nil {
		t.Fatal(err)
	}
	return r.Events
}
