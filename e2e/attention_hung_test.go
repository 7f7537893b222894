package e2e

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/dbustest"
)

// TestE2EAttentionMuteNotifications: a notification service that takes
// Notify calls and never answers them holds nothing up: the inhibitor is
// released at the last turn's end (before its daemon.attention, as with a
// working service), other sessions' notices flow while the first Notify
// still hangs, and SIGTERM stops the daemon (the hung call is cancelled).
func TestE2EAttentionMuteNotifications(t *testing.T) {
	bus := dbustest.StartBus(t)
	l := dbustest.StartLogin1(t, bus)
	notes := dbustest.StartMuteNotifications(t, bus)
	d := daemontest.Start(t, daemontest.Options{Config: "notify = \"desktop\"\n",
		Env: []string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus.Address, "DBUS_SESSION_BUS_ADDRESS=" + bus.Address}})
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	a, b, e := heldSession(t, c.Client, "a"), heldSession(t, c.Client, "b"), heldSession(t, c.Client, "e")
	sendTurn(t, c.Client, a, "/approve")
	c.next(t, a, api.AttentionApprovalRequested)
	in := l.Next(t)
	notes.Next(t) // the approval's Notify: taken, never answered
	approve(t, c.Client, a)
	c.next(t, a, api.AttentionTurnCompleted)
	if in.Held() {
		t.Fatal("inhibitor still held at the last turn's daemon.attention while a Notify hangs")
	}
	for _, id := range []string{b, e} {
		sendTurn(t, c.Client, id, "hello")
		c.next(t, id, api.AttentionTurnCompleted)
	}
	d.Stop()
	if strings.Count(d.Log.String(), "desktop notification failed") > 1 {
		t.Fatalf("the hung service's failures logged more than once:\n%s", d.Log.String())
	}
}

// TestE2EKeepAwakeMuteLogind: a logind that never answers Inhibit delays
// no daemon.attention, gets one call at a time however many turns start,
// and does not hold up SIGTERM.
func TestE2EKeepAwakeMuteLogind(t *testing.T) {
	bus := dbustest.StartBus(t)
	l := dbustest.StartLogin1Mode(t, bus, dbustest.Login1Mute)
	d := daemontest.Start(t, daemontest.Options{Env: []string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus.Address}})
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	a, b := heldSession(t, c.Client, "a"), heldSession(t, c.Client, "b")
	sendTurn(t, c.Client, a, "/approve")
	l.Attempt(t) // the Inhibit call, never answered
	c.next(t, a, api.AttentionApprovalRequested)
	sendTurn(t, c.Client, b, "/approve")
	c.next(t, b, api.AttentionApprovalRequested)
	approve(t, c.Client, b)
	c.next(t, b, api.AttentionTurnCompleted)
	if n := l.Tried(); n != 1 {
		t.Fatalf("%d Inhibit calls while the first still hangs, want 1", n)
	}
	d.Stop()
}
