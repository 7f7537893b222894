package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/rpc"
)

// spawnGate reports whether a proxy is where it either spawns a daemon
// or waits for another starter: blocked opening the started daemon's log
// (a FIFO the test has not opened yet: the kernel's wait_for_partner), or
// holding the start lock file open.
func spawnGate(pid int, lock string) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
	for _, w := range tasks {
		if b, err := os.ReadFile(w); err == nil && strings.TrimSpace(string(b)) == "wait_for_partner" {
			return true
		}
	}
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && l == lock {
			return true
		}
	}
	return false
}

// TestE2EProxyStartLockOneSpawn: four proxies started together against a
// state dir with no daemon spawn exactly one daemon between them, and
// after `ctl shutdown` of it none starts another behind it, until a
// proxy started afterwards asks for one (902d1f9:
// without the start lock each spawned its own; the store's flock let one
// serve, and a loser still waiting for that flock took over once the
// winner stopped).
//
// Timing-free: the started daemon's log, <state-dir>/sessiond.log, is a
// FIFO, so every spawn waits in the starter's open of it until the test
// opens the read side. The test opens it only once each proxy either
// waits there or holds the start lock file open, so each has dialled and
// found no daemon before any can exist (with the lock every proxy holds
// the lock file open, so the pass never needs wchan; only a mutant's
// proxies are seen by it). The FIFO then counts the spawns
// (each started daemon logs "store opened" or that another runs on the
// state dir), and its EOF says every daemon ever spawned has exited.
// (Mutation: Connect without startLock -> 4 spawns, and a loser takes over
// after the shutdown.)
func TestE2EProxyStartLockOneSpawn(t *testing.T) {
	const n = 4
	sock := filepath.Join(shortDir(t), "s.sock")
	state, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(state, "sessiond.log")
	if err := syscall.Mkfifo(logPath, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range servesOn(sock) {
			if !exitsWithin(t, pid, syscall.SIGTERM, 30*time.Second) {
				exitsWithin(t, pid, syscall.SIGKILL, 10*time.Second)
			}
		}
	})
	ps := make([]*proxyCmd, n)
	for i := range ps {
		ps[i] = startProxy(t, "--socket", sock, "--state-dir", state, "--config", cfg)
	}
	lock := filepath.Join(state, "proxy-start.lock")
	for i, p := range ps {
		for deadline := time.Now().Add(60 * time.Second); !spawnGate(p.cmd.Process.Pid, lock); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("proxy %d neither waits to spawn nor holds the start lock after 60 s: %s", i, p.stderr.String())
			}
		}
	}
	// The read side: a blocking open, answered by the first spawn's.
	logf, err := os.OpenFile(logPath, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	var lines []string
	logEOF := make(chan struct{})
	go func() {
		defer close(logEOF)
		sc := bufio.NewScanner(logf)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
	}()

	pids := make([]int, n)
	for i, p := range ps {
		io.WriteString(p.stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"client":{"name":"proxy-e2e","version":"0"},"capabilities":[]}}`+"\n"+
			`{"jsonrpc":"2.0","id":1,"method":"daemon.status"}`+"\n")
		for range 2 {
			l, err := p.stdout.ReadString('\n')
			if err != nil {
				t.Fatalf("proxy %d: %v: %s", i, err, p.stderr.String())
			}
			var st struct {
				Result rpc.Status `json:"result"`
			}
			if json.Unmarshal([]byte(l), &st) == nil && st.Result.PID != 0 {
				pids[i] = st.Result.PID
			}
		}
	}
	for i := range pids {
		if pids[i] == 0 || pids[i] != pids[0] {
			t.Fatalf("daemon pids %v: want one daemon answering every proxy", pids)
		}
	}
	// Every spawn happened before its proxy connected: those still alive
	// are here.
	if live := servesOn(sock); len(live) != 1 || live[0] != pids[0] {
		t.Errorf("serve processes on the socket %v, want only %d", live, pids[0])
	}

	if code, out, errOut := runCtl(t, sock, t.TempDir(), "shutdown"); code != 0 {
		t.Fatalf("ctl shutdown: exit %d: %s%s", code, out, errOut)
	}
	for i, p := range ps {
		if _, code := p.wait(t); code != 1 {
			t.Errorf("proxy %d: exit %d after the shutdown, want 1 (the daemon closed): %s", i, code, p.stderr.String())
		}
	}
	// No proxy runs any more, so none can spawn; the log's EOF comes when
	// every daemon ever spawned has exited.
	select {
	case <-logEOF:
	case <-time.After(60 * time.Second):
		t.Fatalf("a daemon still runs 60 s after the shutdown (it took over): serve processes %v", servesOn(sock))
	}
	opened, lost := 0, 0
	for _, l := range lines {
		switch {
		case strings.Contains(l, "store opened"):
			opened++
		case strings.Contains(l, "another sessiond is running on this state directory"):
			lost++
		}
	}
	if opened != 1 || lost != 0 {
		t.Fatalf("%d daemons opened the store and %d lost it to another: want one spawn; log:\n%s", opened, lost, strings.Join(lines, "\n"))
	}
	if c, err := net.Dial("unix", sock); err == nil {
		c.Close()
		t.Fatal("a daemon accepts on the socket after the shutdown")
	} else if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatal(err)
	}
	// Unless asked: a proxy started now starts a daemon again (the FIFO's
	// read side is still open, so its log open does not wait).
	p := startProxy(t, "--socket", sock, "--state-dir", state, "--config", cfg)
	io.WriteString(p.stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"client":{"name":"proxy-e2e","version":"0"},"capabilities":[]}}`+"\n"+
		`{"jsonrpc":"2.0","id":1,"method":"daemon.status"}`+"\n")
	p.stdin.Close()
	got, code := p.wait(t)
	var st struct {
		Result rpc.Status `json:"result"`
	}
	if code != 0 || len(got) != 2 || json.Unmarshal([]byte(got[1]), &st) != nil || st.Result.PID == 0 || st.Result.PID == pids[0] {
		t.Fatalf("a proxy asked after the shutdown: exit %d, %q: %s", code, got, p.stderr.String())
	}
	stopDaemon(t, sock, state, st.Result.PID)
}
