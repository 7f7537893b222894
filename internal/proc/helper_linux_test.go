package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// testStateID tags every helper of this test process; each test adds its
// own session id, so leftovers are found per test and per run.
var testStateID = fmt.Sprintf("proctest-%d-%d", os.Getpid(), time.Now().UnixNano())

// stopReaper wraps m.Run so the subreaper's goroutine is stopped before
// goleak looks.
type stopReaper struct {
	m    *testing.M
	stop func()
}

func (s stopReaper) Run() int {
	defer s.stop()
	return s.m.Run()
}

func TestMain(m *testing.M) {
	if mode := os.Getenv("PROC_HELPER"); mode != "" {
		os.Exit(helperMain(mode))
	}
	stop, err := SetSubreaper(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "SetSubreaper:", err)
		os.Exit(2)
	}
	goleak.VerifyTestMain(stopReaper{m, stop}, goleak.Cleanup(func(code int) {
		if left := taggedPIDs("SESSIOND_STATE_ID=" + testStateID); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "processes left behind: %v\n", left)
			killAll(left)
			code = 1
		}
		os.Exit(code)
	}))
}

// helperMain is the test binary re-executed as a misbehaving child. Every
// helper dies with the test process (a pidfd on it, polled).
func helperMain(mode string) int {
	switch mode {
	case "exit-at-start":
		fmt.Fprintln(os.Stderr, "fatal: provider refused to start")
		return 3
	case "exit-code":
		return 7
	case "grandchild":
		ignoreTerm()
		if f := os.NewFile(3, "ready"); f != nil {
			f.Write([]byte("ok"))
			f.Close()
		}
		watchdog()
		return 0
	}
	go watchdog()
	switch mode {
	case "cooperative":
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		fmt.Println("bye") // written while exiting: must not be lost
		return 0
	case "stderr-holder":
		// a descendant keeps our stderr open after we exit
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "PROC_HELPER=sleep")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		fmt.Printf("ready %d\n", cmd.Process.Pid)
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "ignore-sigterm":
		notifyTerm()
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		select {}
	case "sleep":
		fmt.Println("ready")
		select {}
	case "orphan", "orphan-scrubbed", "orphan-group":
		pid := startGrandchild(mode)
		fmt.Printf("ready %d\n", pid)
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "escape":
		// a descendant that escapes the inferred tree: started by an
		// intermediate that exits (so it is no descendant of ours), in a
		// new session, env tags scrubbed, stdio on /dev/null, SIGTERM ignored
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "PROC_HELPER=escape-mid")
		out, err := cmd.Output()
		if err != nil {
			panic(err)
		}
		fmt.Printf("ready %s\n", strings.TrimSpace(string(out)))
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "escape-mid":
		fmt.Println(startGrandchild("orphan-scrubbed"))
		return 0
	case "escape-held":
		// escape, but the intermediate stays until a line on stdin: the
		// grandchild is a descendant of ours until then
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "PROC_HELPER=escape-mid-held")
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		fmt.Printf("ready %s\n", strings.TrimSpace(line))
		bufio.NewReader(os.Stdin).ReadString('\n')
		in.Close()
		cmd.Wait()
		fmt.Println("released")
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "escape-mid-held":
		fmt.Println(startGrandchild("orphan-scrubbed"))
		io.Copy(io.Discard, os.Stdin)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper", mode)
	return 2
}

// startGrandchild starts a descendant that ignores SIGTERM with stdio on
// /dev/null: detached (setsid) for "orphan" (tags inherited) and
// "orphan-scrubbed" (tags removed), in our group with tags removed for
// "orphan-group". It returns once the grandchild ignores SIGTERM.
func startGrandchild(mode string) int {
	pr, pw, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(os.Args[0])
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PROC_HELPER=") || (mode != "orphan" && strings.HasPrefix(kv, "SESSIOND_")) {
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "PROC_HELPER=grandchild")
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: mode != "orphan-group"}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	pw.Close()
	io.ReadAll(pr)
	return cmd.Process.Pid
}

// watchdog returns (and exits the helper) when the test process is gone.
func watchdog() {
	ppid, _ := strconv.Atoi(os.Getenv("PROC_TEST_PID"))
	fd, err := unix.PidfdOpen(ppid, 0)
	if err == nil {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				break
			}
		}
	}
	os.Exit(0)
}

// ---- test side ----

var sessionSeq atomic.Uint64

// helper is a spawned helper with its ready line read.
type helper struct {
	*Child
	tags  Tags
	out   *bufio.Reader
	grand Identity // grandchild, for orphan modes
}

func testTags(t *testing.T) Tags {
	name := regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-")
	// unique per test and per test process (two runs may overlap)
	sid := fmt.Sprintf("%s-%d-%d", name, os.Getpid(), sessionSeq.Add(1))
	return Tags{SessionID: sid, Fence: 1, StateID: testStateID}
}

// spawnHelper starts the test binary as helper mode and waits for its ready
// line (unless the mode exits at once). At the end of the test no process
// carrying its session tag may remain.
func spawnHelper(t *testing.T, mode string) *helper {
	t.Helper()
	return spawnHelperIn(t, mode, nil)
}

// spawnHelperIn is spawnHelper in cgroup mode when g is not nil.
func spawnHelperIn(t *testing.T, mode string, g *Cgroups) *helper {
	t.Helper()
	tags := testTags(t)
	c, err := Spawn(Spec{
		Path: os.Args[0], Args: []string{"-test.run=^$"},
		Env: append(os.Environ(), "PROC_HELPER="+mode, "PROC_TEST_PID="+strconv.Itoa(os.Getpid()),
			"GORACE=atexit_sleep_ms=0"), // a race-built helper would linger 1 s at exit
		Tags: tags, Dir: t.TempDir(), Cgroups: g,
	})
	if err != nil {
		t.Fatalf("Spawn %s: %v", mode, err)
	}
	h := &helper{Child: c, tags: tags, out: bufio.NewReader(c.Stdout())}
	t.Cleanup(func() { cleanupHelper(t, h) })
	if mode == "exit-at-start" || mode == "exit-code" {
		return h
	}
	line, err := h.out.ReadString('\n')
	if err != nil {
		t.Fatalf("helper %s: no ready line: %v (stderr %q)", mode, err, c.StderrTail())
	}
	if f := strings.Fields(line); len(f) == 2 {
		pid, _ := strconv.Atoi(f[1])
		h.grand = identityFor(t, pid, true)
	}
	return h
}

func cleanupHelper(t *testing.T, h *helper) {
	t.Helper()
	// the root is the test's own child: the test may leave it to us
	h.Stdin().Close()
	h.Child.cmd.Process.Kill()
	<-h.Exited()
	h.Stdout().Close()
	tag := EnvSessionID + "=" + h.tags.SessionID
	if left := taggedPIDs(tag); len(left) > 0 {
		t.Errorf("processes left behind with %s: %v", tag, left)
		killAll(left)
	}
	if h.grand.PID > 0 && Probe(h.grand) == Alive {
		t.Errorf("grandchild %d left behind", h.grand.PID)
		syscall.Kill(h.grand.PID, syscall.SIGKILL)
	}
}

// identityFor reads pid's identity now (zero StartTicks if it is gone).
func identityFor(t *testing.T, pid int, must bool) Identity {
	t.Helper()
	r, err := newStatReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	id, _, err := identityOf(r, pid)
	if err != nil && must {
		t.Fatalf("identity of %d: %v", pid, err)
	}
	if err != nil {
		id = Identity{PID: pid}
	}
	return id
}

// taggedPIDs lists live processes whose environ holds the entry kv.
func taggedPIDs(kv string) []int {
	paths, _ := filepath.Glob("/proc/[0-9]*/environ")
	var out []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, e := range bytes.Split(b, []byte{0}) {
			if string(e) == kv {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				if pid != os.Getpid() {
					out = append(out, pid)
				}
				break
			}
		}
	}
	return out
}

func killAll(pids []int) {
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
