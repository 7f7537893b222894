package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// userManager is a real `systemd --user` for one test. This machine's PID 1
// is not systemd, so the manager runs in private namespaces: a mount
// namespace whose /run/systemd/system exists (systemd refuses to run as a
// user instance otherwise), and a cgroup namespace rooted at a cgroup of
// its own with the cgroup filesystems mounted afresh, so it sees and
// manages only that subtree. (Without it, a root user manager takes the
// machine's cgroup root for its own and moves every process into its
// init.scope.) Units run in those namespaces too.
type userManager struct {
	t       *testing.T
	cmd     *exec.Cmd
	env     []string
	runtime string // XDG_RUNTIME_DIR (%t)
	exited  chan struct{}
}

const systemdBin = "/lib/systemd/systemd"

// startUserManager skips unless a user manager can run here: the systemd
// binary, root (for the namespaces), a cgroup layout it knows, and no
// systemd already booted (a booted host has its own user managers: use a
// login session there). SESSIOND_TEST_SYSTEMD=0 skips it.
func startUserManager(t *testing.T) *userManager {
	t.Helper()
	if os.Getenv("SESSIOND_TEST_SYSTEMD") == "0" {
		t.Skip("SESSIOND_TEST_SYSTEMD=0")
	}
	for _, p := range []string{systemdBin, "/usr/bin/systemctl", "/usr/bin/unshare", "/usr/bin/nsenter"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("no %s: no systemd user manager can run here (apt-get install systemd util-linux)", p)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a private mount namespace that makes systemd --user start")
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("this machine runs systemd: run the units in a real login session instead")
	}
	hierarchies := cgroupHierarchies(t)
	rt, err := os.MkdirTemp("", "sdm") // short: sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	notify := notifySocket(t)
	m := &userManager{t: t, runtime: rt, exited: make(chan struct{})}
	m.env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt, "XDG_CONFIG_HOME="+t.TempDir(), "GORACE=atexit_sleep_ms=0")
	m.cmd = exec.Command("/bin/sh", "-c", managerScript(hierarchies), systemdBin)
	m.cmd.Env = append(m.env, "NOTIFY_SOCKET="+notify.LocalAddr().String())
	out := &daemontest.SyncBuffer{}
	m.cmd.Stdout, m.cmd.Stderr = out, out
	sysx.Tie(m.cmd, syscall.SIGTERM)
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	own := "sessiond-test-" + strconv.Itoa(m.cmd.Process.Pid)
	t.Cleanup(func() { removeCgroups(t, hierarchies, own) })
	go func() {
		m.cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(m.stop)
	// The manager itself speaks sd_notify: READY=1 once it is up.
	for {
		msg := nextNotify(t, notify, 60*time.Second)
		if strings.Contains("\n"+msg+"\n", "\nREADY=1\n") {
			return m
		}
	}
}

// systemctl runs `systemctl --user ARGS` inside the manager's namespace.
func (m *userManager) systemctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/nsenter", append([]string{"-t", strconv.Itoa(m.cmd.Process.Pid), "-m", "--",
		"systemctl", "--user", "--no-pager"}, args...)...)
	cmd.Env = m.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (m *userManager) must(args ...string) string {
	m.t.Helper()
	out, err := m.systemctl(args...)
	if err != nil {
		m.t.Fatalf("systemctl --user %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// show returns one property of a unit.
func (m *userManager) show(unit, prop string) string {
	m.t.Helper()
	return strings.TrimSpace(m.must("show", "--value", "-p", prop, unit))
}

func (m *userManager) stop() {
	m.systemctl("stop", "sessiond.service", "sessiond.socket")
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(60 * time.Second):
		m.cmd.Process.Kill()
		<-m.exited
	}
}

// ctlIn runs `sessiond ctl ARGS` with the manager's environment: no
// --socket, so ctl finds the socket as a user's shell would
// ($XDG_RUNTIME_DIR/sessiond/sessiond.sock).
func (m *userManager) ctl(args ...string) (int, string) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, daemontest.Binary(m.t), append([]string{"ctl"}, args...)...)
	cmd.Env = m.env
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		m.t.Fatal(err)
	}
	return code, string(out)
}

// TestSystemdUserService runs the installed units under a real systemd
// user manager: the socket exists before any daemon, the first ctl call
// starts sessiond (Type=notify: active only after READY=1), sessions work,
// `systemctl stop` runs the daemon's own shutdown (result success, not a
// timeout or SIGKILL), the socket file survives, and the next call starts
// it again.
func TestSystemdUserService(t *testing.T) {
	m := startUserManager(t)
	install := exec.Command(daemontest.Binary(t), "install-service", "--binary", filepath.Join(t.TempDir(), "sessiond"))
	install.Env = m.env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install-service: %v\n%s", err, out)
	}
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, nil, 0o600)
	m.must("set-environment", "SESSIOND_STATE_DIR="+state, "SESSIOND_CONFIG="+cfg)
	m.must("daemon-reload")
	m.must("enable", "--now", "sessiond.socket")
	sock := filepath.Join(m.runtime, "sessiond", "sessiond.sock")
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("sessiond.socket did not create %s: %v", sock, err)
	}
	if s := m.show("sessiond.service", "ActiveState"); s != "inactive" {
		t.Fatalf("sessiond.service %s before any connection", s)
	}

	code, out := m.ctl("status")
	if code != 0 {
		t.Fatalf("ctl status (activation): exit %d\n%s\n%s", code, out, m.must("status", "sessiond.service"))
	}
	pid := m.show("sessiond.service", "MainPID")
	if s := m.show("sessiond.service", "ActiveState"); s != "active" || !strings.Contains(out, pid) {
		t.Fatalf("after ctl status: service %s pid %s; status:\n%s", s, pid, out)
	}
	code, out = m.ctl("--json", "create", "--provider", "echo", "--cwd", t.TempDir())
	var created struct {
		SessionID string `json:"sessionId"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil {
		t.Fatalf("ctl create: exit %d\n%s", code, out)
	}
	id := created.SessionID
	if code, out = m.ctl("send", id, "hello"); code != 0 || !strings.Contains(out, "echo: hello") {
		t.Fatalf("ctl send: exit %d\n%s", code, out)
	}

	m.must("stop", "sessiond.service")
	if r := m.show("sessiond.service", "Result"); r != "success" {
		t.Fatalf("stop result %q, want success (the daemon's own shutdown, exit 0)", r)
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("socket gone after the service stopped: %v", err)
	}
	if code, out = m.ctl("status"); code != 0 {
		t.Fatalf("ctl status after stop (second activation): exit %d\n%s", code, out)
	}
	if p2 := m.show("sessiond.service", "MainPID"); p2 == pid || p2 == "0" {
		t.Fatalf("no new daemon: pid %s then %s", pid, p2)
	}
}
