package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/rpc"
)

// servesOn lists the live `sessiond serve` processes whose command line
// names socket.
func servesOn(socket string) []int {
	var pids []int
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte("serve\x00")) || !bytes.Contains(b, []byte(socket+"\x00")) {
			continue
		}
		var pid int
		fmt.Sscanf(strings.TrimPrefix(f, "/proc/"), "%d/cmdline", &pid)
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !bytes.Contains(st, []byte(") Z ")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// exitsWithin waits on a pidfd for pid's exit (signalling it first when
// sig is not 0); false when it still runs after d.
func exitsWithin(t *testing.T, pid int, sig syscall.Signal, d time.Duration) bool {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return true // gone already
	}
	defer unix.Close(fd)
	if sig != 0 {
		unix.PidfdSendSignal(fd, sig, nil, 0)
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(d.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n == 1
	}
}

// TestACPBridgesStartOneDaemon: two bridges started at once with no
// daemon running start one between them (the store's flock turns the
// second `serve` away and its bridge connects to the first); both
// sessions live in that one daemon.
func TestACPBridgesStartOneDaemon(t *testing.T) {
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "run", "sessiond.sock")
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--socket", socket, "--state-dir", state, "--config", cfg}
	t.Cleanup(func() {
		for _, pid := range servesOn(socket) {
			if !exitsWithin(t, pid, syscall.SIGTERM, 30*time.Second) {
				exitsWithin(t, pid, syscall.SIGKILL, 10*time.Second)
			}
		}
	})
	e1, e2 := startEditor(t, args...), startEditor(t, args...)
	c1, c2 := e1.start("initialize", map[string]any{"protocolVersion": 1}), e2.start("initialize", map[string]any{"protocolVersion": 1})
	e1.wait(c1)
	e2.wait(c2)
	id1, id2 := e1.newSession(t.TempDir()), e2.newSession(t.TempDir())

	c, err := rpc.Dial(context.Background(), socket, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var st rpc.Status
	if err := c.Call(context.Background(), "daemon.status", nil, &st); err != nil {
		t.Fatal(err)
	}
	all, err := c.ListAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range all {
		seen[s.SessionID] = true
	}
	if !seen[id1] || !seen[id2] {
		t.Fatalf("the daemon on %s has %v, not both bridges' sessions %s %s", socket, all, id1, id2)
	}
	// Any other serve started for that socket lost the flock and exits
	// by itself; only the daemon that answered stays.
	for _, pid := range servesOn(socket) {
		if pid != st.PID && !exitsWithin(t, pid, 0, 20*time.Second) {
			t.Fatalf("a second daemon %d runs beside %d", pid, st.PID)
		}
	}
}
