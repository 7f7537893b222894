package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// requireCgroupMode fails (never skips) unless the daemon runs in cgroup
// mode, naming the reason it gave.
func requireCgroupMode(t *testing.T, d *daemontest.Daemon) api.Supervision {
	t.Helper()
	s := d.Status(t).Supervision
	if s.Mode != "cgroup" {
		t.Fatalf("cgroup mode is required here and the daemon runs in %s mode: %s", s.Mode, s.Reason)
	}
	return s
}

// cgSession is a held echo session with its own attached client.
type cgSession struct {
	c   *rpc.Client
	rec *recorder
	id  string
}

func openCgSession(t *testing.T, d *daemontest.Daemon, provider string) *cgSession {
	t.Helper()
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e-cgroup", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: provider, Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	return &cgSession{c: c, rec: rec, id: s.SessionID}
}

// turn sends text and returns the answer once the turn completed.
func (s *cgSession) turn(t *testing.T, text string) string {
	t.Helper()
	if err := s.c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.id, Text: text}, nil); err != nil {
		t.Fatal(err)
	}
	var d event.DeltaData
	if err := json.Unmarshal(waitEvent(t, s.rec.ch, event.MessageCompleted).Data, &d); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, s.rec.ch, event.TurnCompleted)
	return d.Text
}

func (s *cgSession) info(t *testing.T) api.SessionInfo {
	t.Helper()
	var si api.SessionInfo
	if err := s.c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: s.id}, &si); err != nil {
		t.Fatal(err)
	}
	return si
}

// closeExited closes the session and returns its provider.exited data.
func (s *cgSession) closeExited(t *testing.T) event.ProviderExitedData {
	t.Helper()
	var cr api.CloseResult
	if err := s.c.Call(ctx10(t), "agentSession.close", api.SessionParams{SessionID: s.id}, &cr); err != nil {
		t.Fatalf("close: %v", err)
	}
	var ex event.ProviderExitedData
	if err := json.Unmarshal(waitEvent(t, s.rec.ch, event.ProviderExited).Data, &ex); err != nil {
		t.Fatal(err)
	}
	return ex
}

// pidAfter reads the number after key in an echo answer ("escaped=123").
func pidAfter(t *testing.T, text, key string) int {
	t.Helper()
	_, rest, ok := strings.Cut(text, key)
	if !ok {
		t.Fatalf("no %s in the answer %q", key, text)
	}
	pid, err := strconv.Atoi(strings.Fields(rest)[0])
	if err != nil || pid <= 0 {
		t.Fatalf("bad %s in the answer %q", key, text)
	}
	return pid
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// cgroupOf is pid's cgroup v2 path as /proc shows it.
func cgroupOf(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

func gone(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist)
}

// TestE2ECgroupEscapedDescendant: a descendant started early that leaves
// every inferred tree (an intermediate that exits, setsid, stdio on
// /dev/null, empty env, SIGTERM ignored) is still in the session's cgroup;
// close leaves no process, provider.exited says tree exited (proven by
// populated 0) and the cgroup is removed.
func TestE2ECgroupEscapedDescendant(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "[ladder]\ngrace = \"100ms\"\nterm_timeout = \"300ms\"\nkill_timeout = \"20s\"\n"})
	sup := requireCgroupMode(t, d)
	s := openCgSession(t, d, "echo")
	pid := pidAfter(t, s.turn(t, "/escape"), "escaped=")
	si := s.info(t)
	if si.Cgroup == "" || !strings.HasSuffix(si.Cgroup, cgroupOf(pid)) || cgroupOf(pid) == "" {
		t.Fatalf("escaped pid %d is in cgroup %q, the session's is %q", pid, cgroupOf(pid), si.Cgroup)
	}
	ex := s.closeExited(t)
	if ex.Root != "exited" || ex.Tree != "exited" {
		t.Fatalf("provider.exited %+v, want root and tree exited", ex)
	}
	if running(pid) {
		t.Fatalf("escaped descendant %d still runs after close", pid)
	}
	if !gone(si.Cgroup) {
		t.Fatalf("session cgroup %s not removed", si.Cgroup)
	}
	if !strings.Contains(d.Log.String(), `"via":"cgroup.kill"`) {
		t.Fatalf("the last rung was not cgroup.kill:\n%s", d.Log.String())
	}
	d.Stop()
	if !gone(sup.Cgroup) {
		t.Fatalf("a clean shutdown left %s", sup.Cgroup)
	}
}

// TestE2ECgroupRestartReapsStale: the daemon is SIGKILLed with an escaped
// descendant running; the next start empties and removes the crashed
// run's session cgroup before it listens, and journals the tail.
func TestE2ECgroupRestartReapsStale(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	requireCgroupMode(t, d)
	s := openCgSession(t, d, "echo")
	pid := pidAfter(t, s.turn(t, "/escape"), "escaped=")
	dir := s.info(t).Cgroup
	d.Kill()
	if !running(pid) {
		t.Fatalf("escaped descendant %d died with the daemon: the test proves nothing", pid)
	}
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir})
	requireCgroupMode(t, d2)
	if running(pid) {
		t.Fatalf("escaped descendant %d of the crashed run still runs once the daemon listens", pid)
	}
	if !gone(dir) {
		t.Fatalf("the crashed run's session cgroup %s is still there", dir)
	}
	waitLog(t, d2, `"msg":"stale cgroup reaped"`)
	var r api.ReadResult
	if err := d2.Client(t).Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: s.id, Limit: 4096}, &r); err != nil {
		t.Fatal(err)
	}
	last := r.Events[len(r.Events)-3]
	if last.Type != event.ProviderExited || !strings.Contains(string(last.Data), `"tree":"exited"`) {
		t.Fatalf("tail after restart: %s %s", last.Type, last.Data)
	}
}

// TestE2ECgroupCtlUsage: ctl show and ctl top count a session's processes
// and memory from its cgroup, the escaped descendant included.
func TestE2ECgroupCtlUsage(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	requireCgroupMode(t, d)
	s := openCgSession(t, d, "echo")
	pidAfter(t, s.turn(t, "/escape"), "escaped=")
	dir := t.TempDir()
	code, out, errOut := runCtl(t, d.Socket, dir, "show", s.id)
	if code != 0 || !regexp.MustCompile(`(?m)^processes\s+2 \(from cgroup\)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^memory\s+\d+(\.\d)?[KMG] \(from cgroup\)$`).MatchString(out) {
		t.Fatalf("show: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCtl(t, d.Socket, dir, "--json", "top", "--once", "--interval", "100ms")
	var rows []struct {
		Procs  int    `json:"processes"`
		Memory uint64 `json:"memoryBytes"`
		From   string `json:"usageFrom"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 {
		t.Fatalf("top: exit %d %q %s", code, out, errOut)
	}
	if r := rows[0]; r.Procs != 2 || r.Memory == 0 || r.From != "cgroup" {
		t.Fatalf("top row %+v: want 2 processes and memory from the cgroup", r)
	}
}
