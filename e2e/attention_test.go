package e2e

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/dbustest"
)

// The attention tests run a real dbus-daemon on a private address as the
// system bus, with dbustest.Login1 standing in for systemd-logind (which
// cannot run in this container: it needs systemd as PID 1), and a second
// one as the session bus with a test org.freedesktop.Notifications.

// attnClient is a connection that records daemon.attention notices.
type attnClient struct {
	*rpc.Client
	notices chan api.AttentionNotice
}

func dialAttn(t *testing.T, d *daemontest.Daemon, name, device string, caps []string) *attnClient {
	t.Helper()
	ac := &attnClient{notices: make(chan api.AttentionNotice, 256)}
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: name, Device: device, Capabilities: caps,
		OnNotify: func(method string, p json.RawMessage) {
			var n api.AttentionNotice
			if method == rpc.NotifyAttention && json.Unmarshal(p, &n) == nil {
				ac.notices <- n
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ac.Client = c
	return ac
}

// next waits for the next notice and checks its session and kind.
func (ac *attnClient) next(t *testing.T, sessionID, kind string) api.AttentionNotice {
	t.Helper()
	select {
	case n := <-ac.notices:
		if n.SessionID != sessionID || n.Kind != kind || n.At.IsZero() {
			t.Fatalf("daemon.attention %+v, want session %s kind %s", n, sessionID, kind)
		}
		return n
	case <-time.After(30 * time.Second):
		t.Fatalf("no daemon.attention %s for %s", kind, sessionID)
	}
	return api.AttentionNotice{}
}

// heldSession creates an echo session titled title and holds it (no attach).
func heldSession(t *testing.T, c *rpc.Client, title string) string {
	t.Helper()
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir(), Title: title}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "h"}, nil); err != nil {
		t.Fatal(err)
	}
	return s.SessionID
}

func sendTurn(t *testing.T, c *rpc.Client, id, text string) {
	t.Helper()
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: id, Text: text}, nil); err != nil {
		t.Fatal(err)
	}
}

// journaled reads session id's journal and returns its events of type typ.
func journaled(t *testing.T, c *rpc.Client, id, typ string) []event.Event {
	t.Helper()
	var r api.ReadResult
	if err := c.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: id}, &r); err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	for _, ev := range r.Events {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// approve answers the session's (only) pending approval.
func approve(t *testing.T, c *rpc.Client, id string) {
	t.Helper()
	reqs := journaled(t, c, id, event.ApprovalRequested)
	if len(reqs) == 0 {
		t.Fatalf("session %s: no approval.requested journaled", id)
	}
	req := decodeData[event.ApprovalRequestedData](t, reqs[len(reqs)-1])
	if err := c.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: id, RequestID: req.RequestID, Decision: "approve"}, nil); err != nil {
		t.Fatal(err)
	}
}

// keepAwakeDaemon starts a system bus with Login1 and a daemon using it.
func keepAwakeDaemon(t *testing.T, config string) (*daemontest.Daemon, *dbustest.Login1) {
	t.Helper()
	bus := dbustest.StartBus(t)
	l := dbustest.StartLogin1(t, bus)
	d := daemontest.Start(t, daemontest.Options{Config: config, Env: []string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus.Address}})
	return d, l
}

func attentionOf(t *testing.T, d *daemontest.Daemon) api.AttentionStatus {
	t.Helper()
	st := d.Status(t)
	if st.Attention == nil {
		t.Fatal("daemon.status has no attention")
	}
	return *st.Attention
}

// TestE2EKeepAwakeTwoTurns: the first turn takes one logind inhibitor
// (sleep:idle, block), a second concurrent turn takes none more; the end
// of the first keeps it, the end of the last releases it — before the
// daemon.attention of that end goes out, so a client told "turn
// completed" finds the descriptor closed (poll sees the hang-up).
func TestE2EKeepAwakeTwoTurns(t *testing.T) {
	d, l := keepAwakeDaemon(t, "")
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	if at := attentionOf(t, d); !at.KeepAwake.Active || at.KeepAwake.Held || at.Notify != "none" {
		t.Fatalf("idle attention %+v, want active, not held, notify none", at)
	}
	a, b := heldSession(t, c.Client, "A"), heldSession(t, c.Client, "B")
	sendTurn(t, c.Client, a, "/approve one")
	c.next(t, a, api.AttentionApprovalRequested)
	in := l.Next(t)
	if in.What != "sleep:idle" || in.Who != "sessiond" || in.Mode != "block" || in.Why != "1 agent turn(s) running" {
		t.Fatalf("Inhibit(%q, %q, %q, %q)", in.What, in.Who, in.Why, in.Mode)
	}
	waitLog(t, d, "keeping the machine awake") // taken off the loop: notices do not wait for it
	if at := attentionOf(t, d); !at.KeepAwake.Held {
		t.Fatalf("attention %+v while a turn runs, want held", at)
	}
	sendTurn(t, c.Client, b, "/approve two")
	c.next(t, b, api.AttentionApprovalRequested)
	if n := l.Calls(); n != 1 {
		t.Fatalf("%d Inhibit calls for two concurrent turns, want 1", n)
	}
	approve(t, c.Client, a)
	c.next(t, a, api.AttentionTurnCompleted)
	if !in.Held() {
		t.Fatal("inhibitor released at the first turn's end while another runs")
	}
	approve(t, c.Client, b)
	ended := time.Now()
	c.next(t, b, api.AttentionTurnCompleted)
	if in.Held() {
		t.Fatal("inhibitor still held when the last turn's daemon.attention arrived")
	}
	<-in.Released()
	t.Logf("released %v after the last turn's answer was sent", time.Since(ended))
	if at := attentionOf(t, d); at.KeepAwake.Held || !at.KeepAwake.Active {
		t.Fatalf("attention %+v after the turns, want active, not held", at)
	}
	if n := l.Calls(); n != 1 {
		t.Fatalf("%d Inhibit calls, want 1", n)
	}
}

// TestE2EKeepAwakeProviderCrash: a provider that crashes mid-turn (the
// host journals turn.completed {interrupted, provider_exited}) releases
// the inhibitor, and the user hears turn_failed.
func TestE2EKeepAwakeProviderCrash(t *testing.T) {
	d, l := keepAwakeDaemon(t, "")
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	a := heldSession(t, c.Client, "crashing")
	sendTurn(t, c.Client, a, "/approve /crash")
	c.next(t, a, api.AttentionApprovalRequested)
	in := l.Next(t)
	approve(t, c.Client, a) // the child then exits 3 after one delta
	c.next(t, a, api.AttentionTurnFailed)
	if in.Held() {
		t.Fatal("inhibitor still held after the provider crashed mid-turn")
	}
	done := journaled(t, c.Client, a, event.TurnCompleted)
	if len(done) != 1 || decodeData[event.TurnCompletedData](t, done[0]).Status != event.StatusInterrupted {
		t.Fatalf("turn.completed %+v, want one, interrupted", done)
	}
}

// TestE2EKeepAwakeDaemonKilled: a SIGKILLed daemon's inhibitor ends with
// its process (the kernel closes the descriptor; no provider child holds
// a copy: it is close-on-exec).
func TestE2EKeepAwakeDaemonKilled(t *testing.T) {
	d, l := keepAwakeDaemon(t, "")
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	a := heldSession(t, c.Client, "killed")
	sendTurn(t, c.Client, a, "/approve")
	c.next(t, a, api.AttentionApprovalRequested)
	in := l.Next(t)
	d.Kill()
	select {
	case <-in.Released():
	case <-time.After(30 * time.Second):
		t.Fatal("inhibitor descriptor still open 30 s after the daemon was SIGKILLed (a provider child kept a copy?)")
	}
}

// TestE2EKeepAwakeUnavailable: with no logind on the system bus the
// daemon says why in daemon.status, logs it once (not per turn), and
// turns still run; keep_awake = false says so.
func TestE2EKeepAwakeUnavailable(t *testing.T) {
	bus := dbustest.StartBus(t) // nobody owns org.freedesktop.login1
	d := daemontest.Start(t, daemontest.Options{Env: []string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus.Address}})
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	a := heldSession(t, c.Client, "u")
	for range 2 {
		sendTurn(t, c.Client, a, "hello")
		c.next(t, a, api.AttentionTurnCompleted)
	}
	at := attentionOf(t, d)
	if at.KeepAwake.Active || at.KeepAwake.Held || !strings.Contains(at.KeepAwake.Reason, "org.freedesktop.login1") {
		t.Fatalf("attention %+v, want inactive naming org.freedesktop.login1", at)
	}
	if n := strings.Count(d.Log.String(), "keep-awake unavailable"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, d.Log.String())
	}
	if code, out, _ := runCtl(t, d.Socket, t.TempDir(), "status"); code != 0 ||
		!strings.Contains(out, "keep-awake") || !strings.Contains(out, "UNAVAILABLE") || !strings.Contains(out, "org.freedesktop.login1") {
		t.Fatalf("ctl status (%d) does not say keep-awake is unavailable:\n%s", code, out)
	}
	if code, out, _ := runCtl(t, d.Socket, t.TempDir(), "doctor"); code != 0 ||
		!strings.Contains(out, "ok       keep-awake: UNAVAILABLE") || !strings.Contains(out, "keep_awake = false") {
		t.Fatalf("ctl doctor (%d) does not report the unavailable inhibitor (and stays exit 0):\n%s", code, out)
	}

	off := daemontest.Start(t, daemontest.Options{Config: "keep_awake = false\n"})
	if at := attentionOf(t, off); at.KeepAwake.Active || at.KeepAwake.Reason != "keep_awake = false" {
		t.Fatalf("attention %+v with keep_awake = false", at)
	}
}

// TestE2EAttentionNotify: with notify = "desktop", exactly one Notify per
// attention event of a session nothing is attached to, none for one a
// surface attached; daemon.attention goes to every connection with the
// capability, attached or not, and to none without it.
func TestE2EAttentionNotify(t *testing.T) {
	bus := dbustest.StartBus(t)
	notes := dbustest.StartNotifications(t, bus)
	d := daemontest.Start(t, daemontest.Options{Config: "keep_awake = false\nnotify = \"desktop\"\n",
		Env: []string{"DBUS_SESSION_BUS_ADDRESS=" + bus.Address}})
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	without := dialAttn(t, d, "old", "", without(rpc.Capabilities, api.CapAttention))
	if at := attentionOf(t, d); at.Notify != "desktop" {
		t.Fatalf("attention %+v, want notify desktop", at)
	}
	alone := heldSession(t, c.Client, "Fix the build")
	sendTurn(t, c.Client, alone, "/approve")
	n := c.next(t, alone, api.AttentionApprovalRequested)
	if n.Title != "Fix the build" {
		t.Fatalf("notice title %q", n.Title)
	}
	// The desktop is told on its own goroutine, in order: wait for it.
	if got := notes.Next(t); got.App != "sessiond" || !strings.Contains(got.Summary, "approval") || got.Body != "Fix the build" {
		t.Fatalf("Notify %+v, want an approval for \"Fix the build\"", got)
	}
	approve(t, c.Client, alone)
	c.next(t, alone, api.AttentionTurnCompleted)
	if got := notes.Next(t); !strings.Contains(got.Summary, "finished") {
		t.Fatalf("Notify %+v, want the turn's end", got)
	}

	watched := heldSession(t, c.Client, "watched")
	surface := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	if err := surface.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: watched}, nil); err != nil {
		t.Fatal(err)
	}
	sendTurn(t, c.Client, watched, "/approve")
	c.next(t, watched, api.AttentionApprovalRequested)
	surface.next(t, watched, api.AttentionApprovalRequested)
	approve(t, c.Client, watched)
	c.next(t, watched, api.AttentionTurnCompleted)
	// Posts go out in order: a turn of the unattended session after the
	// watched one's is the next Notify unless the watched one's were posted.
	sendTurn(t, c.Client, alone, "hello")
	c.next(t, alone, api.AttentionTurnCompleted)
	if got := notes.Next(t); got.Body != "Fix the build" {
		t.Fatalf("Notify %+v for a session a surface attached, want none", got)
	}
	// Every notice above was queued for `without` before c's was written,
	// had it been sent; a round trip on it comes after any of them.
	if err := without.Call(ctx10(t), "daemon.status", nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-without.notices:
		t.Fatalf("daemon.attention %+v sent to a connection without %s", n, api.CapAttention)
	default:
	}
}

// TestE2EOrigin: turn.started and approval.resolved carry the sender's
// client name and connection id, and the device a client named in
// initialize (a phone through the relay); a bad client.device is
// invalid_params naming the field.
func TestE2EOrigin(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	desk := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	phone := dialAttn(t, d, "relay", "phone:Pixel 8", rpc.Capabilities)
	a := heldSession(t, desk.Client, "o")
	sendTurn(t, desk.Client, a, "/approve")
	desk.next(t, a, api.AttentionApprovalRequested)
	approve(t, phone.Client, a)
	desk.next(t, a, api.AttentionTurnCompleted)
	st := decodeData[event.TurnStartedData](t, journaled(t, desk.Client, a, event.TurnStarted)[0])
	if want := (event.Origin{Client: "desktop", ConnectionID: desk.Init.ConnectionID}); st.Origin == nil || *st.Origin != want {
		t.Fatalf("turn.started origin %+v, want %+v", st.Origin, want)
	}
	res := decodeData[event.ApprovalResolvedData](t, journaled(t, desk.Client, a, event.ApprovalResolved)[0])
	if want := (event.Origin{Client: "relay", ConnectionID: phone.Init.ConnectionID, Device: "phone:Pixel 8"}); res.Origin == nil || *res.Origin != want {
		t.Fatalf("approval.resolved origin %+v, want %+v", res.Origin, want)
	}

	for _, bad := range []struct{ device, has string }{
		{"pixel\n8", "control character"},
		{strings.Repeat("p", api.MaxDeviceBytes+1), "limit of 256 bytes"},
	} {
		_, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "relay", Device: bad.device})
		var re *rpc.Error
		if !errors.As(err, &re) || re.Reason != "invalid_params" || re.Data["field"] != "client.device" || !strings.Contains(re.Message, bad.has) {
			t.Fatalf("initialize with device %q: %v, want invalid_params naming client.device (%s)", api.Prefix(bad.device), err, bad.has)
		}
	}
}
