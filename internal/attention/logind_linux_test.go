package attention

import (
	"testing"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// hungUp reports whether the pipe whose read end is r has no writer left.
func hungUp(t *testing.T, r int) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(r), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, 0); err != nil {
		t.Fatal(err)
	}
	return fds[0].Revents&unix.POLLHUP != 0
}

func pipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]) })
	return p[0], p[1]
}

// TestFDSweeper: of the descriptors a call's connection receives, only
// the one the call takes stays open; one in a message that arrives after
// the call is over (an answer come just after a timeout) is closed too.
func TestFDSweeper(t *testing.T) {
	var sw fdSweeper
	r1, w1 := pipe(t)
	r2, w2 := pipe(t)
	sw.intercept(&dbus.Message{Body: []any{dbus.UnixFD(w1), []dbus.UnixFD{dbus.UnixFD(w2), dbus.UnixFD(w2)}}})
	if !sw.finish(w1) {
		t.Fatal("finish does not find the descriptor it keeps")
	}
	if hungUp(t, r1) || !hungUp(t, r2) {
		t.Fatalf("after finish: kept one hung up %v, other hung up %v; want kept open, other closed", hungUp(t, r1), hungUp(t, r2))
	}
	unix.Close(w1)
	r3, w3 := pipe(t)
	sw.intercept(&dbus.Message{Body: []any{"late", dbus.UnixFD(w3)}})
	if !hungUp(t, r3) {
		t.Fatal("a descriptor received after the call was over is still open")
	}
	var failed fdSweeper
	r4, w4 := pipe(t)
	failed.intercept(&dbus.Message{Body: []any{dbus.UnixFD(w4)}})
	if failed.finish(-1) || !hungUp(t, r4) {
		t.Fatal("a failed call's descriptor is still open")
	}
}
