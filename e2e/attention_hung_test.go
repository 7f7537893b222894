package e2e

import (
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestE2EAttentionNonReader: a connection that negotiated
// daemon.attention.v1 and reads nothing is closed once
// rpc.maxAttentionQueued (256) notices wait for it, logged once; the
// reading connection gets every notice meanwhile.
func TestE2EAttentionNonReader(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "keep_awake = false\n"})
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	mute := dialRaw(t, d.Socket, false)
	mute.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"client":{"name":"mute"},"capabilities":["daemon.attention.v1"]}}`)
	mute.recv()
	title := strings.Repeat("t", api.MaxTitleBytes) // ~4 KB a notice: the socket's buffer fills soon
	var ids []string
	for range 20 {
		ids = append(ids, heldSession(t, c.Client, title))
	}
	pid := d.Cmd.Process.Pid
	before := probeRSS(pid)
	for round := 0; !strings.Contains(d.Log.String(), "reads no daemon.attention"); round++ {
		if round == 40 { // 800 notices, ~3.4 MB, against a socket buffer and 256 queued
			t.Fatalf("the connection that reads nothing is still open after %d notices:\n%s", round*len(ids), d.Log.String())
		}
		for _, id := range ids {
			sendTurn(t, c.Client, id, "hello")
			c.next(t, id, api.AttentionTurnCompleted)
		}
	}
	t.Logf("RSS %s before, %s after", before, probeRSS(pid))
	mute.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.Copy(io.Discard, mute.nc); err != nil { // what it had been sent, then EOF
		t.Fatalf("the non-reading connection: %v, want it closed", err)
	}
	sendTurn(t, c.Client, ids[0], "hello")
	c.next(t, ids[0], api.AttentionTurnCompleted)
	if n := strings.Count(d.Log.String(), "reads no daemon.attention"); n != 1 {
		t.Fatalf("logged %d times, want once", n)
	}
}

// probeRSS is the process's VmRSS line, for the log.
func probeRSS(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS") {
			return strings.Join(strings.Fields(l)[1:], " ")
		}
	}
	return "?"
}

// TestE2EKeepAwakeTwoDescriptors: a logind answering Inhibit with two
// descriptors is a wrong answer: the daemon closes both (none stays held
// unseen), reports why, and turns run as ever.
func TestE2EKeepAwakeTwoDescriptors(t *testing.T) {
	bus := dbustest.StartBus(t)
	l := dbustest.StartLogin1Mode(t, bus, dbustest.Login1TwoFDs)
	d := daemontest.Start(t, daemontest.Options{Env: []string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus.Address}})
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	a := heldSession(t, c.Client, "two")
	sendTurn(t, c.Client, a, "/approve")
	first, second := l.Next(t), l.Next(t)
	for i, in := range []*dbustest.Inhibition{first, second} {
		select {
		case <-in.Released():
		case <-time.After(30 * time.Second):
			t.Fatalf("descriptor %d of a two-descriptor answer still open 30 s on, the turn still running", i+1)
		}
	}
	waitLog(t, d, "keep-awake unavailable")
	c.next(t, a, api.AttentionApprovalRequested)
	if at := attentionOf(t, d); at.KeepAwake.Active || at.KeepAwake.Held {
		t.Fatalf("attention %+v after a two-descriptor answer, want inactive", at)
	}
}

// TestE2EAttentionNotifyDescriptor: a notification service whose Notify
// answer carries a descriptor (a wrong answer) leaves none open in the
// daemon.
func TestE2EAttentionNotifyDescriptor(t *testing.T) {
	bus := dbustest.StartBus(t)
	notes := dbustest.StartFDNotifications(t, bus)
	d := daemontest.Start(t, daemontest.Options{Config: "keep_awake = false\nnotify = \"desktop\"\n",
		Env: []string{"DBUS_SESSION_BUS_ADDRESS=" + bus.Address}})
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	a := heldSession(t, c.Client, "fd")
	sendTurn(t, c.Client, a, "hello")
	c.next(t, a, api.AttentionTurnCompleted)
	notes.Next(t)
	in := notes.Handed()[0]
	select {
	case <-in.Released():
	case <-time.After(30 * time.Second):
		t.Fatal("the descriptor in a Notify answer is still open in the daemon 30 s on")
	}
}
