package attention

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// logind's bus name, object and method (org.freedesktop.login1(5)).
const (
	logindName   = "org.freedesktop.login1"
	logindPath   = dbus.ObjectPath("/org/freedesktop/login1")
	logindMethod = "org.freedesktop.login1.Manager.Inhibit"
	// InhibitWhat and InhibitMode are what the daemon asks for.
	InhibitWhat = "sleep:idle"
	InhibitMode = "block"
	InhibitWho  = "sessiond"
)

// Logind takes systemd-logind inhibitors over the system bus
// ($DBUS_SYSTEM_BUS_ADDRESS, else the standard socket): Inhibit answers
// a descriptor, and the inhibitor lasts until every copy of it is closed,
// so it also ends with the daemon's process.
type Logind struct{}

// Name implements Inhibitor.
func (Logind) Name() string { return "logind" }

// Probe pings logind (which starts it when it is bus-activated).
func (Logind) Probe(ctx context.Context) error {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("%w: system bus: %w", ErrUnavailable, err)
	}
	defer conn.Close()
	if err := conn.Object(logindName, logindPath).CallWithContext(ctx, "org.freedesktop.DBus.Peer.Ping", 0).Err; err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, logindName, err)
	}
	return nil
}

// Inhibit calls Manager.Inhibit(InhibitWhat, InhibitWho, why, InhibitMode).
// The bus connection is closed at once: the inhibitor is the descriptor.
// Every other descriptor the connection receives is closed (fdSweeper):
// none may stay open unseen, each could be an inhibitor nobody releases.
func (Logind) Inhibit(ctx context.Context, why string) (io.Closer, error) {
	var sw fdSweeper
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx), dbus.WithIncomingInterceptor(sw.intercept))
	if err != nil {
		return nil, fmt.Errorf("%w: system bus: %w", ErrUnavailable, err)
	}
	defer conn.Close()
	var fd dbus.UnixFD
	if err := conn.Object(logindName, logindPath).CallWithContext(ctx, logindMethod, 0,
		InhibitWhat, InhibitWho, why, InhibitMode).Store(&fd); err != nil {
		sw.finish(-1)
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, logindMethod, err)
	}
	if !sw.finish(int(fd)) {
		return nil, fmt.Errorf("%w: %s: the answer's descriptor %d was not received", ErrUnavailable, logindMethod, fd)
	}
	// Received descriptors are close-on-exec already (MSG_CMSG_CLOEXEC);
	// said again, because a provider child must never keep it.
	unix.CloseOnExec(int(fd))
	return os.NewFile(uintptr(fd), "logind-inhibitor"), nil
}

// fdSweeper sees every message a connection receives (an incoming
// interceptor runs before the message is dispatched) and closes the
// descriptors the call does not take: all of them when the call failed
// (a wrong answer: two descriptors, a type mismatch), and those of any
// message that arrives once the call is over — an answer that came just
// after the call gave up (timeout, Close) is dropped by godbus with its
// descriptors open, and logind's inhibitor would then be held for as
// long as the daemon runs.
type fdSweeper struct {
	mu      sync.Mutex
	over    bool
	pending []int
}

func (s *fdSweeper) intercept(m *dbus.Message) {
	var fds []int
	for _, v := range m.Body {
		switch fd := v.(type) {
		case dbus.UnixFD:
			fds = append(fds, int(fd))
		case []dbus.UnixFD:
			for _, f := range fd {
				fds = append(fds, int(f))
			}
		}
	}
	if len(fds) == 0 {
		return
	}
	s.mu.Lock()
	over := s.over
	if !over {
		s.pending = append(s.pending, fds...)
	}
	s.mu.Unlock()
	if over {
		closeFDs(fds, -1)
	}
}

// finish ends the call: every descriptor received so far but keep is
// closed, and every one received later will be. It reports whether keep
// (-1: none) was among those received.
func (s *fdSweeper) finish(keep int) bool {
	s.mu.Lock()
	s.over = true
	fds := s.pending
	s.pending = nil
	s.mu.Unlock()
	return closeFDs(fds, keep)
}

// closeFDs closes fds but keep, each once (a body may name one twice),
// reporting whether keep was among them.
func closeFDs(fds []int, keep int) bool {
	found := false
	seen := map[int]bool{}
	for _, fd := range fds {
		if seen[fd] {
			continue
		}
		seen[fd] = true
		if fd == keep {
			found = true
			continue
		}
		unix.Close(fd)
	}
	return found
}
