package providertest

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// Decode is ev's data as a T, failing the test when it does not decode.
func Decode[T any](t testing.TB, ev event.Event) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		t.Fatalf("%s data %s: %v", ev.Type, ev.Data, err)
	}
	return v
}

// LastOf is the last event of type typ in evs, failing without one.
func LastOf(t testing.TB, evs []event.Event, typ string) event.Event {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i]
		}
	}
	t.Fatalf("no %s", typ)
	return event.Event{}
}

// Message is the text of turn's message.delta events, and that of its
// message.completed, which must name the deltas' item (an error if not).
func (s *Session) Message(t testing.TB, turn string) (deltas, completed string) {
	t.Helper()
	var itemID string
	for _, ev := range s.Events() {
		if ev.TurnID != turn {
			continue
		}
		switch ev.Type {
		case event.MessageDelta:
			dd := Decode[event.DeltaData](t, ev)
			deltas += dd.Text
			itemID = dd.ItemID
		case event.MessageCompleted:
			dd := Decode[event.DeltaData](t, ev)
			completed = dd.Text
			if dd.ItemID != itemID || itemID == "" {
				t.Errorf("message.completed item %q, deltas' %q", dd.ItemID, itemID)
			}
		}
	}
	return deltas, completed
}

// ReopenResumed is Reopen after a restart of the daemon: the hold must be
// on thread, and the provider.started journaled for it a resume.
func ReopenResumed(t testing.TB, d *daemontest.Daemon, client, id, thread string) *Session {
	t.Helper()
	s := Reopen(t, d, client, id)
	if s.Hold.ThreadID != thread {
		t.Fatalf("re-hold thread %s, want %s", s.Hold.ThreadID, thread)
	}
	started := Decode[struct {
		Resumed bool `json:"resumed"`
	}](t, LastOf(t, s.ReadAll(t), event.ProviderStarted))
	if !started.Resumed {
		t.Fatal("provider.started after the restart is not a resume")
	}
	return s
}

// ThreadID is the session's thread id as agentSession.get reports it.
func (s *Session) ThreadID(t testing.TB) string {
	t.Helper()
	var info api.SessionInfo
	if err := s.C.Call(Ctx(t), "agentSession.get", api.SessionParams{SessionID: s.ID}, &info); err != nil {
		t.Fatal(err)
	}
	return info.ThreadID
}

// WaitArrived waits for a value on a model server's Arrived channel.
func WaitArrived(t testing.TB, arrived <-chan struct{}) {
	t.Helper()
	select {
	case <-arrived:
	case <-Ctx(t).Done():
		t.Fatal("the model saw no request")
	}
}

// NoAnomalies: the ordinary traffic of provider logs no protocol anomaly.
func NoAnomalies(t testing.TB, d *daemontest.Daemon, provider string) {
	t.Helper()
	for _, line := range strings.Split(d.Log.String(), "\n") {
		if strings.Contains(line, "provider protocol anomaly") {
			t.Errorf("daemon logged an anomaly for ordinary %s traffic: %s", provider, line)
		}
	}
}

// NoProcesses waits until no process carries the daemon's tags. A CLI may
// start processes of its own (codex snapshots the login shell) that
// outlive the ladder's first pass; bounded cleanup takes them within its
// first retry (5 s). There is no signal for another process's exit, so
// this polls.
func NoProcesses(t testing.TB, d *daemontest.Daemon) {
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

// Alive: pid exists and is not a zombie nobody has reaped yet (a
// container's pid 1 may not reap the orphans it inherits).
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// WaitFile waits until path exists (a command the agent runs wrote it).
// There is no signal for another process's write, so this polls.
func WaitFile(t testing.TB, path string) {
	t.Helper()
	deadline := time.Now().Add(WaitLong)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
