package dbustest

import (
	"os"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// Inhibition is one Inhibit call the Login1 service answered.
type Inhibition struct {
	What, Who, Why, Mode string
	r                    *os.File      // the pipe's read end; the caller got the write end
	released             chan struct{} // closed when r reads EOF: every copy of the write end is closed
}

// Released is closed once the inhibitor is released (every copy of the
// descriptor handed out is closed: by the daemon, or with its process).
func (in *Inhibition) Released() <-chan struct{} { return in.released }

// Held reports, at this instant, whether the descriptor is still open
// somewhere: poll(2) on the read end says POLLHUP as soon as the last
// write end is closed (the kernel's state, no reader goroutine between).
func (in *Inhibition) Held() bool {
	fds := []unix.PollFd{{Fd: int32(in.r.Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && (n == 0 || fds[0].Revents&(unix.POLLHUP|unix.POLLIN) == 0)
}

// Login1 is a test stand-in for systemd-logind's Manager.Inhibit on a Bus
// (logind cannot run in the test container): each call gets a new pipe's
// write end, as logind hands out a FIFO's, and the service watches the
// read end for the EOF that means released.
type Login1 struct {
	calls    chan *Inhibition
	attempts chan struct{} // one per Inhibit call received, answered or not
	mu       sync.Mutex
	all      []*Inhibition
	tried    int
}

// Login1Mode is how a Login1 answers Inhibit.
type Login1Mode int

// The modes: a working logind, one that never answers Inhibit, one that
// answers an error, one that answers no descriptor (a string), and one
// that answers two descriptors (each watched: Inhibitions gets both).
const (
	Login1Works Login1Mode = iota
	Login1Mute
	Login1Fails
	Login1NoFD
	Login1TwoFDs
)

// StartLogin1 owns org.freedesktop.login1 on b and serves Inhibit (and
// Peer.Ping) until the test ends.
func StartLogin1(t testing.TB, b *Bus) *Login1 {
	t.Helper()
	return StartLogin1Mode(t, b, Login1Works)
}

// StartLogin1Mode is StartLogin1 answering Inhibit as mode says.
func StartLogin1Mode(t testing.TB, b *Bus, mode Login1Mode) *Login1 {
	t.Helper()
	c := b.Connect(t)
	own(t, c, "org.freedesktop.login1")
	l := &Login1{calls: make(chan *Inhibition, 64), attempts: make(chan struct{}, 4096)}
	serve(t, c, func(m *dbus.Message) (*dbus.Message, func()) {
		switch member(m) {
		case "org.freedesktop.DBus.Peer.Ping":
			return reply(m), nil
		case "org.freedesktop.login1.Manager.Inhibit":
			var in Inhibition
			if err := dbus.Store(m.Body, &in.What, &in.Who, &in.Why, &in.Mode); err != nil {
				return errorReply(m, "org.freedesktop.DBus.Error.InvalidArgs", err.Error()), nil
			}
			l.mu.Lock()
			l.tried++
			l.mu.Unlock()
			select {
			case l.attempts <- struct{}{}:
			default:
			}
			switch mode {
			case Login1Mute:
				return nil, nil
			case Login1Fails:
				return errorReply(m, "org.freedesktop.DBus.Error.AccessDenied", "Permission denied"), nil
			case Login1NoFD:
				return reply(m, "not a descriptor"), nil
			}
			n := 1
			if mode == Login1TwoFDs {
				n = 2
			}
			var (
				ins  []*Inhibition
				ws   []*os.File
				body []any
			)
			for range n {
				in := in // each its own pipe
				w, err := in.watch(t)
				if err != nil {
					for _, w := range ws {
						w.Close()
					}
					return errorReply(m, "org.freedesktop.DBus.Error.Failed", err.Error()), nil
				}
				ins, ws, body = append(ins, &in), append(ws, w), append(body, dbus.UnixFD(w.Fd()))
			}
			// After the reply is written (Send is synchronous), the caller
			// holds its own copy: ours must go, or EOF never comes.
			return reply(m, body...), func() {
				for _, w := range ws {
					w.Close()
				}
				l.mu.Lock()
				l.all = append(l.all, ins...)
				l.mu.Unlock()
				for _, in := range ins {
					l.calls <- in
				}
			}
		}
		return errorReply(m, "org.freedesktop.DBus.Error.UnknownMethod", "no "+member(m)), nil
	})
	return l
}

// watch makes in a new pipe and watches its read end for EOF; the write
// end is returned, to hand out.
func (in *Inhibition) watch(t testing.TB) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	in.r, in.released = r, make(chan struct{})
	go func() {
		defer close(in.released)
		buf := make([]byte, 1)
		for {
			if _, err := r.Read(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { r.Close() })
	return w, nil
}

// Next waits for the next Inhibit call (with Login1TwoFDs: the next
// descriptor handed out).
func (l *Login1) Next(t testing.TB) *Inhibition {
	t.Helper()
	select {
	case in := <-l.calls:
		return in
	case <-timeout():
		t.Fatalf("no Inhibit call within %v", within)
		return nil
	}
}

// Attempt waits for the next Inhibit call received (answered or not).
func (l *Login1) Attempt(t testing.TB) {
	t.Helper()
	select {
	case <-l.attempts:
	case <-timeout():
		t.Fatalf("no Inhibit call within %v", within)
	}
}

// Tried is how many Inhibit calls were received so far.
func (l *Login1) Tried() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tried
}

// Calls is how many Inhibit calls were answered so far.
func (l *Login1) Calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}
