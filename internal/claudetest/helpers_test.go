package claudetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/claudetest"
	"github.com/sessiond/sessiond/internal/daemontest"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
)

// waitLong bounds each wait on the real binary (a loaded CI machine).
const waitLong = 60 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

// providerConfig is a [providers.NAME] table running the pinned claude
// with env (claudetest.NewEnv).
func providerConfig(t *testing.T, name string, env map[string]string) string {
	cmd := []string{strconv.Quote(claudetest.Binary(t))}
	for _, a := range claudetest.Args {
		cmd = append(cmd, strconv.Quote(a))
	}
	var kv []string
	for k, v := range env {
		kv = append(kv, fmt.Sprintf("%s = %q", k, v))
	}
	sort.Strings(kv)
	return fmt.Sprintf("[providers.%s]\ncommand = [%s]\nprotocol = \"claude-stream-json\"\nenv = { %s }\n",
		name, strings.Join(cmd, ", "), strings.Join(kv, ", "))
}

// daemonWith starts sessiond with the given provider tables.
func daemonWith(t *testing.T, stateDir string, providers ...string) *daemontest.Daemon {
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

// next returns the next event of type typ, failing after waitLong.
func (f *feed) next(t *testing.T, typ string) event.Event {
	t.Helper()
	timeout := time.After(waitLong)
	for {
		select {
		case ev := <-f.ch:
			if ev.Type == typ {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event; saw %s", typ, f.types())
		}
	}
}

func (f *feed) types() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s []string
	for _, ev := range f.evs {
		s = append(s, ev.Type)
	}
	return strings.Join(s, ",")
}

func (f *feed) all() []event.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]event.Event(nil), f.evs...)
}

// session is one claude session driven through the daemon's socket.
type session struct {
	d    *daemontest.Daemon
	c    *rpc.Client
	f    *feed
	id   string
	hold api.HoldResult
}

func dial(t *testing.T, d *daemontest.Daemon) (*rpc.Client, *feed) {
	f := &feed{ch: make(chan event.Event, 1<<16)}
	c, err := rpc.Dial(ctxT(t), d.Socket, rpc.ClientOptions{Name: "claude-e2e", OnNotify: f.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, f
}

// newSession creates a session of provider in cwd, attaches and holds it.
func newSession(t *testing.T, d *daemontest.Daemon, provider, cwd string) *session {
	t.Helper()
	c, f := dial(t, d)
	var info api.SessionInfo
	if err := c.Call(ctxT(t), "agentSession.create", api.CreateParams{Provider: provider, Cwd: cwd}, &info); err != nil {
		t.Fatal(err)
	}
	s := &session{d: d, c: c, f: f, id: info.SessionID}
	s.attachAndHold(t)
	return s
}

func (s *session) attachAndHold(t *testing.T) {
	t.Helper()
	if err := s.c.Call(ctxT(t), "agentSession.attach", api.AttachParams{SessionID: s.id, AfterSeq: s.lastSeq()}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Call(ctxT(t), "agentSession.hold", api.HoldParams{SessionID: s.id, HolderID: "e2e"}, &s.hold); err != nil {
		t.Fatalf("hold: %v\n%s", err, s.d.Log.String())
	}
}

func (s *session) lastSeq() uint64 {
	evs := s.f.all()
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

func (s *session) send(t *testing.T, text string) string {
	t.Helper()
	var r api.SendResult
	if err := s.c.Call(ctxT(t), "agentSession.send", api.SendParams{SessionID: s.id, Text: text}, &r); err != nil {
		t.Fatal(err)
	}
	return r.TurnID
}

func (s *session) respond(t *testing.T, requestID, decision string) {
	t.Helper()
	if err := s.c.Call(ctxT(t), "agentSession.respond", api.RespondParams{SessionID: s.id, RequestID: requestID, Decision: decision}, nil); err != nil {
		t.Fatal(err)
	}
}

func (s *session) close(t *testing.T) {
	t.Helper()
	var cr api.CloseResult
	if err := s.c.Call(ctxT(t), "agentSession.close", api.SessionParams{SessionID: s.id}, &cr); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func decode[T any](t *testing.T, ev event.Event) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		t.Fatalf("%s data %s: %v", ev.Type, ev.Data, err)
	}
	return v
}

// noAnomalies: ordinary claude traffic logs no protocol anomaly.
func noAnomalies(t *testing.T, d *daemontest.Daemon) {
	t.Helper()
	for _, line := range strings.Split(d.Log.String(), "\n") {
		if strings.Contains(line, "provider protocol anomaly") {
			t.Errorf("daemon logged an anomaly for ordinary claude traffic: %s", line)
		}
	}
}

// noProcesses waits until no process carries the daemon's tags. There is
// no signal for another process's exit, so this polls.
func noProcesses(t *testing.T, d *daemontest.Daemon) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := daemontest.TaggedProcesses(d.StateID)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range pids {
				cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
				t.Logf("left: %d %q", p, cmd)
			}
			t.Fatalf("processes of the session left: %v\n%s", pids, d.Log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
