package rpc

import (
	"net"
	"testing"
	"time"
)

// deadlineLog is a net.Conn that records the read deadlines set on it.
type deadlineLog struct {
	net.Conn
	set []time.Time
}

func (d *deadlineLog) SetReadDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return d.Conn.SetReadDeadline(t)
}

// TestReadDeadlineClearedBetweenMessages: a read inside a frame sets the
// stall deadline; the next read between messages clears it (else an idle
// client would be closed for a stall); a read between messages with no
// deadline set makes no deadline call at all.
func TestReadDeadlineClearedBetweenMessages(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	conn := &deadlineLog{Conn: a}
	dr := &deadlineReader{conn: conn, stall: time.Minute}
	buf := make([]byte, 8)
	read := func(inFrame bool) {
		t.Helper()
		dr.inFrame = inFrame
		go b.Write([]byte("x"))
		if _, err := dr.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	read(true)
	if len(conn.set) != 1 || conn.set[0].IsZero() {
		t.Fatalf("inside a frame: deadlines set %v, want one stall deadline", conn.set)
	}
	read(false)
	if len(conn.set) != 2 || !conn.set[1].IsZero() {
		t.Fatalf("between messages after a frame: deadlines set %v, want the stall deadline cleared", conn.set)
	}
	read(false)
	if len(conn.set) != 2 {
		t.Fatalf("between messages, none set: deadlines set %v, want no call", conn.set)
	}
}
