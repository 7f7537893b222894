package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ELiveUpgradeRuntimeKilledInHandover: a shared runtime with a turn
// running on one of its two threads is SIGKILLed after the old image
// handed it over and before the new one adopts it (the exec'd wrapper
// kills it and waits for it to be a zombie or gone, then
// execs the real binary). The upgrade still takes over
// (same pid); each of the runtime's sessions gets its tail once — the
// running turn closed, the session ended, its lease released, every
// reason provider_exited (the provider died; the daemon did not restart)
// — and none is left live on the dead pid; nothing is left running; the next hold
// starts a new runtime that runs a turn.
//
// The same with processes = "session": each session's own child killed.
func TestE2ELiveUpgradeRuntimeKilledInHandover(t *testing.T) {
	t.Run("account", func(t *testing.T) { testProviderKilledInHandover(t, "account") })
	t.Run("session", func(t *testing.T) { testProviderKilledInHandover(t, "session") })
}

func testProviderKilledInHandover(t *testing.T, processes string) {
	d := daemontest.Start(t, daemontest.Options{Config: "idle_timeout = \"3s\"\n[providers.echo]\nprocesses = \"" + processes + "\"\n"})
	c := d.Client(t)
	before := d.Status(t)
	busy, pid := liveSession(t, c)
	idle, idlePID := liveSession(t, c)
	if (idlePID == pid) != (processes == "account") {
		t.Fatalf("the sessions run in pids %d and %d (processes = %s)", pid, idlePID, processes)
	}
	send(t, c, busy, "long /sleep 600000")
	waitJournal(t, func() *rpc.Client { return c }, busy, "turn.started", has(event.TurnStarted))
	next := script(t, fmt.Sprintf(`case "$1" in version) exec "$REAL" "$@";; esac; kill -KILL %[1]d %[2]d
while grep -qs '^State:.*[^Z] ' /proc/%[1]d/status /proc/%[2]d/status; do :; done; exec "$REAL" "$@"`, pid, idlePID))
	var res api.UpgradeResult
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: next}, &res); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, d.Log.String())
	}
	if res.PID != before.PID {
		t.Fatalf("upgrade answered %+v; before: pid %d", res, before.PID)
	}
	c2 := d.Client(t)
	dial := func() *rpc.Client { return c2 }
	for _, id := range []string{busy, idle} {
		evs := waitJournal(t, dial, id, "lease.released", has(event.LeaseReleased))
		if n := count(evs, event.SessionEnded); n != 1 {
			t.Errorf("session %s: %d session.ended: %s", id, n, tail(evs, 8))
		}
		var s api.SessionInfo
		if err := c2.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil {
			t.Fatal(err)
		}
		if s.State == "live" || s.PID == pid || s.PID == idlePID {
			t.Errorf("session %s after its provider died in the handover: state %s pid %d (the dead ones %d %d)", id, s.State, s.PID, pid, idlePID)
		}
		for _, ev := range evs {
			if ev.Type == event.SessionEnded || ev.Type == event.TurnCompleted {
				var d struct {
					Reason string `json:"reason"`
				}
				_ = json.Unmarshal(ev.Data, &d)
				if r := d.Reason; r != event.ReasonProviderExited {
					t.Errorf("session %s: %s with reason %q, want %s: %s", id, ev.Type, r, event.ReasonProviderExited, tail(evs, 6))
				}
			}
		}
	}
	if evs := readJournal(t, c2, busy); count(evs, event.TurnCompleted) != 1 {
		t.Errorf("the running turn was not closed once: %s", tail(evs, 8))
	}
	fresh, freshPID := liveSession(t, c2)
	if freshPID == pid || freshPID == idlePID || freshPID == 0 {
		t.Fatalf("a hold after the dead runtime: pid %d", freshPID)
	}
	send(t, c2, fresh, "after")
	if got := deltaText(t, waitJournal(t, dial, fresh, "turn.completed", turnDone)); got != "echo: after" {
		t.Fatalf("the new runtime's reply is %q", got)
	}
	if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 1 || pids[0] != freshPID {
		t.Errorf("processes of the daemon: %v, want only the new runtime %d", pids, freshPID)
	}
	// Gone before adoption, or still a zombie the new image reaps (then
	// adopted, and its exit seen at once): either is logged.
	if l := d.Log.String(); !strings.Contains(l, "exited before adoption") &&
		!strings.Contains(l, `"msg":"provider exited"`) && !strings.Contains(l, `"msg":"runtime exited"`) {
		t.Errorf("the provider's death in the handover is not logged:\n%s", l)
	}
}
