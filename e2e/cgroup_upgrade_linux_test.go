package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ECgroupLiveUpgrade: in cgroup mode a live upgrade keeps each
// child's cgroup: the new image's startup reap leaves an adopted
// session's cgroup alone (a descendant that escaped into it earlier still
// runs afterwards), and a close after the upgrade stops that tree through
// the cgroup (cgroup.kill, the cgroup removed).
func TestE2ECgroupLiveUpgrade(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "[ladder]\ngrace = \"100ms\"\nterm_timeout = \"300ms\"\nkill_timeout = \"20s\"\n"})
	requireCgroupMode(t, d)
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	s := openCgSession(t, d, "echo")
	pid := pidAfter(t, s.turn(t, "/escape"), "escaped=")
	dir := s.info(t).Cgroup
	inotifyBefore := inotifyFDs(t, d.Cmd.Process.Pid)
	var res api.UpgradeResult
	if err := s.c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, d.Log.String())
	}
	waitLog(t, d, `"msg":"upgrade complete"`)
	// The new image watches the cgroups with the old image's inotify
	// instance (the exec would otherwise wait for the kernel to tear it
	// down): the same descriptor, and no second instance.
	if after := inotifyFDs(t, d.Cmd.Process.Pid); len(inotifyBefore) != 1 || !slices.Equal(after, inotifyBefore) {
		t.Fatalf("inotify descriptors %v before the upgrade, %v after: want the one instance reused\n%s", inotifyBefore, after, d.Log.String())
	}
	if !running(pid) {
		t.Fatalf("the escaped descendant %d of an adopted session was killed by the upgrade", pid)
	}
	if gone(dir) {
		t.Fatalf("the adopted session's cgroup %s was removed by the upgrade", dir)
	}
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e-cgroup", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.id}, nil); err != nil {
		t.Fatal(err)
	}
	after := len(d.Log.String())
	s2 := &cgSession{c: c, rec: rec, id: s.id}
	ex := s2.closeExited(t)
	if ex.Root != "exited" || ex.Tree != "exited" {
		t.Fatalf("provider.exited %+v, want root and tree exited", ex)
	}
	if running(pid) {
		t.Fatalf("escaped descendant %d still runs after the close", pid)
	}
	if !gone(dir) {
		t.Fatalf("session cgroup %s not removed by the close", dir)
	}
	if !strings.Contains(d.Log.String()[after:], `"via":"cgroup.kill"`) {
		t.Fatalf("the close after the upgrade did not end with cgroup.kill:\n%s", d.Log.String()[after:])
	}
}

// TestE2ECgroupUpgradeAdoptedOutlivesGrace: an adopted child that does not
// exit when its stdin closes (echo --ignore-eof) is closed after the
// upgrade: the cgroup ladder SIGTERMs it through the adopted process (an
// adopted child has no exec.Cmd), the tree exits, the daemon carries on.
func TestE2ECgroupUpgradeAdoptedOutlivesGrace(t *testing.T) {
	cfg := fmt.Sprintf("[ladder]\ngrace = \"100ms\"\nterm_timeout = \"20s\"\nkill_timeout = \"20s\"\n[providers.eof]\ncommand = [%q, \"provider\", \"echo\", \"--ignore-eof\"]\n",
		daemontest.Binary(t))
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	requireCgroupMode(t, d)
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	s := openCgSession(t, d, "eof")
	dir := s.info(t).Cgroup
	if err := s.c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, nil); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, d.Log.String())
	}
	waitLog(t, d, `"msg":"upgrade complete"`)
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e-cgroup", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.id}, nil); err != nil {
		t.Fatal(err)
	}
	after := len(d.Log.String())
	ex := (&cgSession{c: c, rec: rec, id: s.id}).closeExited(t)
	if ex.Root != "exited" || ex.Tree != "exited" {
		t.Fatalf("provider.exited %+v, want root and tree exited\n%s", ex, d.Log.String()[after:])
	}
	if !strings.Contains(d.Log.String()[after:], `"signal":"SIGTERM"`) {
		t.Fatalf("the ladder did not SIGTERM the adopted child:\n%s", d.Log.String()[after:])
	}
	if !gone(dir) {
		t.Fatalf("session cgroup %s not removed by the close", dir)
	}
	if st := d.Status(t); st.Version != upgradeVersion {
		t.Fatalf("after the close: version %s", st.Version)
	}
}

// inotifyFDs lists pid's descriptors that are inotify instances.
func inotifyFDs(t *testing.T, pid int) []string { return fdsTo(t, pid, "anon_inode:inotify") }
