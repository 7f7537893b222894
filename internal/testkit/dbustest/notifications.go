package dbustest

import (
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"
)

// Notification is one Notify call.
type Notification struct {
	App, Summary, Body string
}

// Notifications is a test org.freedesktop.Notifications on a Bus: it
// records every Notify, and answers it only after recording it, so a
// caller whose Notify returned has been counted.
type Notifications struct {
	mu   sync.Mutex
	got  []Notification
	each chan Notification // every Notify recorded, as it comes
	mute bool              // never answer Notify (a wedged notification daemon)
	fds  bool              // answer with a pipe's write end too (a wrong answer)
	pipe []*Inhibition     // with fds: each watched read end
}

// StartNotifications owns org.freedesktop.Notifications on b.
func StartNotifications(t testing.TB, b *Bus) *Notifications {
	t.Helper()
	return startNotifications(t, b, false, false)
}

// StartMuteNotifications is StartNotifications whose Notify calls are
// recorded but never answered: a notification service that hangs.
func StartMuteNotifications(t testing.TB, b *Bus) *Notifications {
	t.Helper()
	return startNotifications(t, b, true, false)
}

// StartFDNotifications is StartNotifications whose Notify answers carry
// a descriptor as well (Handed says whether each is still open).
func StartFDNotifications(t testing.TB, b *Bus) *Notifications {
	t.Helper()
	return startNotifications(t, b, false, true)
}

// Handed is the descriptors handed out so far (StartFDNotifications).
func (n *Notifications) Handed() []*Inhibition {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Inhibition(nil), n.pipe...)
}

func startNotifications(t testing.TB, b *Bus, mute, fds bool) *Notifications {
	t.Helper()
	c := b.Connect(t)
	own(t, c, "org.freedesktop.Notifications")
	n := &Notifications{each: make(chan Notification, 4096), mute: mute, fds: fds}
	serve(t, c, func(m *dbus.Message) (*dbus.Message, func()) {
		if member(m) != "org.freedesktop.Notifications.Notify" {
			return errorReply(m, "org.freedesktop.DBus.Error.UnknownMethod", "no "+member(m)), nil
		}
		var (
			nt      Notification
			replace uint32
			icon    string
		)
		if len(m.Body) != 8 {
			return errorReply(m, "org.freedesktop.DBus.Error.InvalidArgs", "Notify takes 8 arguments"), nil
		}
		if err := dbus.Store(m.Body[:5], &nt.App, &replace, &icon, &nt.Summary, &nt.Body); err != nil {
			return errorReply(m, "org.freedesktop.DBus.Error.InvalidArgs", err.Error()), nil
		}
		n.mu.Lock()
		n.got = append(n.got, nt)
		id := uint32(len(n.got))
		n.mu.Unlock()
		signal := func() {
			select {
			case n.each <- nt:
			default:
			}
		}
		if !n.fds {
			signal()
		}
		if n.mute {
			return nil, nil
		}
		if n.fds {
			var in Inhibition
			w, err := in.watch(t)
			if err != nil {
				return errorReply(m, "org.freedesktop.DBus.Error.Failed", err.Error()), nil
			}
			n.mu.Lock()
			n.pipe = append(n.pipe, &in)
			n.mu.Unlock()
			return reply(m, id, dbus.UnixFD(w.Fd())), func() { w.Close(); signal() } // Next: once the answer is out
		}
		return reply(m, id), nil
	})
	return n
}

// Next waits for the next Notify call.
func (n *Notifications) Next(t testing.TB) Notification {
	t.Helper()
	select {
	case nt := <-n.each:
		return nt
	case <-timeout():
		t.Fatalf("no Notify call within %v", within)
		return Notification{}
	}
}

// Got is every Notify so far, in order.
func (n *Notifications) Got() []Notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Notification(nil), n.got...)
}
