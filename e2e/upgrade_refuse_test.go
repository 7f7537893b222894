package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/daemon"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EUpgradeKeepsStoreLock: the store's flock is held across the
// exec (the new image runs on the descriptor the old one handed over): in
// the exec's window (a wrapper runs in the daemon's pid before the real
// binary) nobody else can take it, so a second serve never gets it. After
// the upgrade the sessions still run and a second serve on the same state
// dir exits non-zero naming the other.
func TestE2EUpgradeKeepsStoreLock(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "lock")
	next := script(t, `case "$1" in version) exec "$REAL" "$@";; esac
if flock -n -x "$(dirname "$SESSIOND_HANDOFF")/sessiond.db" true; then echo free >`+marker+`; else echo held >`+marker+`; fi
exec "$REAL" "$@"`)
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	id, pid := liveSession(t, c)
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: next}, nil); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, d.Log.String())
	}
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "held" {
		t.Fatalf("the store's flock during the exec: %q (%v); want held", b, err)
	}
	dup := exec.Command(daemontest.Binary(t), "serve", "--socket", filepath.Join(t.TempDir(), "dup.sock"), "--state-dir", d.StateDir,
		"--config", d.ConfigPath, "--log-format", "json")
	out, err := dup.CombinedOutput()
	if dup.ProcessState == nil || dup.ProcessState.ExitCode() == 0 || !strings.Contains(string(out), "another sessiond is running") {
		t.Fatalf("a second serve on the same state dir: %v\n%s", err, out)
	}
	var s api.SessionInfo
	if err := d.Client(t).Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil || s.PID != pid || s.State != "live" {
		t.Fatalf("session after the upgrade: %+v %v; want pid %d live", s, err, pid)
	}
	send(t, d.Client(t), id, "still here")
	evs := waitJournal(t, func() *rpc.Client { return d.Client(t) }, id, "turn.completed", turnDone)
	if got := deltaText(t, evs); got != "echo: still here" {
		t.Fatalf("after the upgrade the turn answered %q", got)
	}
}

// TestE2EUpgradeHandoffPathOccupied: a FIFO (or a symlink) at the
// handoff's path is neither opened nor followed: the handoff is written to
// a new file renamed over it, and the upgrade completes.
func TestE2EUpgradeHandoffPathOccupied(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	id, pid := liveSession(t, c)
	path := filepath.Join(d.StateDir, daemon.HandoffFile)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	var res api.UpgradeResult
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil {
		t.Fatalf("upgrade with a FIFO at %s: %v\n%s", path, err, d.Log.String())
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	c = d.Client(t)
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil {
		t.Fatalf("upgrade with a symlink at %s: %v\n%s", path, err, d.Log.String())
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep" {
		t.Fatalf("the symlink's target was written: %q %v", b, err)
	}
	var s api.SessionInfo
	if err := d.Client(t).Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil || s.PID != pid || s.State != "live" {
		t.Fatalf("session after the upgrades: %+v %v; want pid %d live", s, err, pid)
	}
}

// TestE2EUpgradeExecFails: the binary is gone by the time of the exec (it
// deletes itself after answering `version`): the caller gets
// upgrade_refused on its connection, which stays open, and the daemon
// serves on as before.
func TestE2EUpgradeExecFails(t *testing.T) {
	next := script(t, `case "$1 $2" in "version --handoff") "$REAL" "$@"; rm -f "$0"; exit 0;; esac; exec "$REAL" "$@"`)
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	before := d.Status(t)
	id, pid := liveSession(t, c)
	err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: next}, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "upgrade_refused" || !strings.Contains(fmt.Sprint(re.Data["cause"]), "exec") {
		t.Fatalf("upgrade to a binary gone at the exec: %v (%v)", err, dataOf(re))
	}
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil || s.PID != pid {
		t.Fatalf("the caller's connection after the refusal: pid %d (want %d) %v", s.PID, pid, err)
	}
	send(t, c, id, "still here")
	evs := waitJournal(t, func() *rpc.Client { return c }, id, "turn.completed", turnDone)
	if got := deltaText(t, evs); got != "echo: still here" {
		t.Fatalf("after the refusal the turn answered %q", got)
	}
	if after := d.Status(t); after.PID != before.PID || after.StartedAt != before.StartedAt {
		t.Fatalf("daemon changed: %+v -> %+v", before, after)
	}
}

// TestE2EUpgradeAfterFailedExec: after an exec that failed, the next
// upgrade on the same connection is answered (its connection is sealed
// and handed over like the first one's, not dropped) and the session
// carries on.
func TestE2EUpgradeAfterFailedExec(t *testing.T) {
	next := script(t, `case "$1 $2" in "version --handoff") "$REAL" "$@"; rm -f "$0"; exit 0;; esac; exec "$REAL" "$@"`)
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	id, pid := liveSession(t, c)
	err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: next}, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "upgrade_refused" {
		t.Fatalf("upgrade to a binary gone at the exec: %v", err)
	}
	var res api.UpgradeResult
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil || res.ToVersion != upgradeVersion {
		t.Fatalf("the upgrade after a failed exec: %+v %v\n%s", res, err, grepLines(d.Log.String(), "upgrade"))
	}
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil || s.PID != pid {
		t.Fatalf("session after the upgrade: %+v %v; want pid %d", s, err, pid)
	}
}

// TestE2EUpgradeCheckBounded: the new binary's `version --handoff` is
// bounded in time (one that leaves a child holding its output is killed
// with its whole process group, the child too) and in size (64 KiB: past
// it the upgrade is refused, however good the lines).
func TestE2EUpgradeCheckBounded(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	pidFile := filepath.Join(t.TempDir(), "child")
	hang := script(t, `case "$1 $2" in "version --handoff") sleep 600 & echo $! >`+pidFile+`; wait;; esac; exec "$REAL" "$@"`)
	huge := script(t, `case "$1 $2" in "version --handoff") yes sessiond-handoff/1 | head -c 1000000; exit 0;; esac; exec "$REAL" "$@"`)
	for _, tc := range []struct{ name, bin, cause string }{
		{"hang", hang, "version --handoff failed"},
		{"huge", huge, "more than 65536 bytes"},
	} {
		err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: tc.bin}, nil)
		var re *rpc.Error
		if !errors.As(err, &re) || re.Reason != "upgrade_refused" || !strings.Contains(fmt.Sprint(re.Data["cause"]), tc.cause) {
			t.Fatalf("%s: %v (%v); want upgrade_refused naming %q", tc.name, err, dataOf(re), tc.cause)
		}
		// The cause names the whole path and is said once.
		if cause := fmt.Sprint(re.Data["cause"]); !strings.Contains(cause, tc.bin) || strings.Count(re.Message, tc.cause) != 1 {
			t.Fatalf("%s: cause %q, message %q: want the path %s and the cause once", tc.name, cause, re.Message, tc.bin)
		}
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	for deadline := time.Now().Add(20 * time.Second); syscall.Kill(pid, 0) == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("the check's child %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond) // another process's exit (reaped by the daemon): nothing to wait on
	}
}

// TestE2EHandoffEnvAtPlainStart: SESSIOND_HANDOFF in a plain start's
// environment naming something that is not this daemon's handoff (a file
// elsewhere, one in the state dir written by another pid, a FIFO there)
// is ignored with a warning: the daemon starts, nothing hangs, and the
// file is left where it is.
func TestE2EHandoffEnvAtPlainStart(t *testing.T) {
	state := t.TempDir()
	other := filepath.Join(t.TempDir(), "precious.json")
	stale := filepath.Join(state, daemon.HandoffFile)
	fifo := filepath.Join(state, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{other, stale} {
		if err := os.WriteFile(p, []byte(`{"format":"sessiond-handoff/1","pid":1}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{other, stale, fifo} {
		d := daemontest.Start(t, daemontest.Options{StateDir: state, Env: []string{daemon.HandoffEnv + "=" + p}})
		if !strings.Contains(d.Log.String(), "not a live upgrade of this daemon") {
			t.Errorf("%s: no warning:\n%s", p, d.Log.String())
		}
		d.Status(t)
		d.Stop()
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("%s was removed: %v", p, err)
		}
	}
	// Without the variable, a leftover handoff in the state dir (its new
	// image died before reading it) is removed at start.
	d := daemontest.Start(t, daemontest.Options{StateDir: state})
	d.Stop()
	if _, err := os.Lstat(stale); err == nil {
		t.Fatalf("the leftover %s was not removed:\n%s", stale, d.Log.String())
	}
}

// TestE2EUpgradeIntruderLeavesTheHandoff: a plain serve on the same state
// dir started in the exec's window (here by a wrapper running in the
// daemon's pid, with the handoff written and not yet read) neither
// removes the handoff nor takes over: it waits for the store's flock,
// which the image being exec'd to holds, gives up naming the other
// daemon, and the upgrade completes with its session live.
func TestE2EUpgradeIntruderLeavesTheHandoff(t *testing.T) {
	dir := t.TempDir()
	intruderLog := filepath.Join(dir, "intruder.log")
	next := script(t, `case "$1" in version) exec "$REAL" "$@";; esac
env -u SESSIOND_HANDOFF -u NOTIFY_SOCKET "$REAL" "$@" --socket `+filepath.Join(dir, "intruder.sock")+` --log-format json >`+intruderLog+` 2>&1
echo "exit $?" >>`+intruderLog+`
exec "$REAL" "$@"`)
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	id, pid := liveSession(t, c)
	var res api.UpgradeResult
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: next}, &res); err != nil {
		b, _ := os.ReadFile(intruderLog)
		t.Fatalf("upgrade with a plain serve started in the exec's window: %v\nintruder:\n%s\ndaemon:\n%s", err, b, d.Log.String())
	}
	b, err := os.ReadFile(intruderLog)
	if err != nil || !strings.Contains(string(b), "another sessiond is running") || strings.Contains(string(b), "exit 0") ||
		strings.Contains(string(b), "leftover live upgrade handoff") {
		t.Fatalf("the intruding serve: %v\n%s", err, b)
	}
	var s api.SessionInfo
	if err := d.Client(t).Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil || s.PID != pid || s.State != "live" {
		t.Fatalf("session after the upgrade: %+v %v; want pid %d live", s, err, pid)
	}
}

// damageRecord overwrites the first byte of every stored copy of id's
// session record in the store file (a damaged disk, under the running
// daemon: bbolt reads the file through a shared mapping) and reports how
// many it found.
func damageRecord(t *testing.T, db, id string) int {
	t.Helper()
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(db, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pat := []byte(id + `{"id"`)
	n := 0
	for off := 0; ; {
		i := bytes.Index(b[off:], pat)
		if i < 0 {
			break
		}
		if _, err := f.WriteAt([]byte{0}, int64(off+i+len(id))); err != nil {
			t.Fatal(err)
		}
		n++
		off += i + len(pat)
	}
	return n
}

// TestE2EUpgradeRefusedForADamagedSession: a live session whose stored
// record was damaged under the running daemon cannot be adopted by a new
// image (it would exit, and every session with it): the upgrade is
// refused naming the session, the daemon carries on (same pid) and its
// other sessions still answer turns. (Found by a hostile probe: the new
// image exited and left a provider that ignores SIGTERM running.)
func TestE2EUpgradeRefusedForADamagedSession(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	bad, _ := liveSession(t, c)
	good, pid := liveSession(t, c)
	if n := damageRecord(t, filepath.Join(d.StateDir, "sessiond.db"), bad); n == 0 {
		t.Fatalf("no stored record of %s found to damage", bad)
	}
	before := d.Status(t)
	err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, nil)
	if cause := refusedCause(t, "upgrade with a damaged session", err); !strings.Contains(cause, bad) || !strings.Contains(cause, "damaged") {
		t.Fatalf("refused with cause %q; want it to name %s as damaged", cause, bad)
	}
	if after := d.Status(t); after.PID != before.PID || after.StartedAt != before.StartedAt {
		t.Fatalf("daemon changed: %+v -> %+v", before, after)
	}
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: good}, &s); err != nil || s.PID != pid || s.State != "live" {
		t.Fatalf("the healthy session after the refusal: %+v %v", s, err)
	}
	send(t, c, good, "still here")
	evs := waitJournal(t, func() *rpc.Client { return c }, good, "turn.completed", turnDone)
	if got := deltaText(t, evs); got != "echo: still here" {
		t.Fatalf("after the refusal the turn answered %q", got)
	}
}

// TestE2EUpgradeLeakedDescriptorStaysHome: a descriptor the new image
// inherits without close-on-exec and the handoff does not name (here
// opened by a wrapper before it execs the real binary: an image that
// leaked it, or handed over a field this binary does not read) reaches no
// child the new image starts.
func TestE2EUpgradeLeakedDescriptorStaysHome(t *testing.T) {
	// bash: the descriptor is one no handoff field can be (a number past
	// what the old image had open); sh's redirections stop at 9.
	next := filepath.Join(t.TempDir(), "sessiond-next")
	body := "#!/bin/bash\nREAL=" + daemontest.Binary(t) + "\n" + `case "$1" in version) exec "$REAL" "$@";; esac
exec 250<"$0"
exec "$REAL" "$@"
`
	if err := os.WriteFile(next, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: next}, nil); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, d.Log.String())
	}
	leaked := func(pid int) []string { return fdsTo(t, pid, next) }
	if fds := leaked(d.Cmd.Process.Pid); len(fds) != 1 {
		t.Fatalf("the daemon holds %v open on the wrapper: the case is not set up", fds)
	}
	c = d.Client(t)
	_, pid := liveSession(t, c)
	if fds := leaked(pid); len(fds) != 0 {
		t.Fatalf("a child started after the upgrade inherited descriptors %v the handoff does not name", fds)
	}
}

// fdsTo lists pid's descriptors whose link reads target (a path, or an
// anonymous inode's name).
func fdsTo(t *testing.T, pid int, target string) []string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == target {
			fds = append(fds, e.Name())
		}
	}
	return fds
}
