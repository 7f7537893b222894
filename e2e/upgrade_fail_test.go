package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// script writes an executable shell script wrapping the real binary.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sessiond-next")
	text := "#!/bin/sh\nREAL=" + daemontest.Binary(t) + "\n" + body + "\n"
	if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestE2EUpgradeRefused: a binary that does not read the daemon's handoff
// format, one that is not executable, one that does not exist, a relative
// path and one with a NUL byte are refused with upgrade_refused (or invalid_params) naming
// the cause; the daemon carries on unchanged: same pid, same version, the
// live child still answers turns.
func TestE2EUpgradeRefused(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	before := d.Status(t)
	id, pid := liveSession(t, c)
	notExec := filepath.Join(t.TempDir(), "sessiond-noexec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, binary, reason, cause string
	}{
		{"old format", script(t, `case "$1 $2" in "version --handoff") echo sessiond-handoff/0; exit 0;; esac; exec "$REAL" "$@"`),
			"upgrade_refused", "reads handoff formats [sessiond-handoff/0]"},
		{"no --handoff", script(t, `case "$2" in --handoff) echo "usage" >&2; exit 2;; esac; exec "$REAL" "$@"`),
			"upgrade_refused", "version --handoff failed"},
		{"not executable", notExec, "upgrade_refused", "is not an executable file"},
		{"missing", filepath.Join(t.TempDir(), "nope"), "upgrade_refused", "no such file"},
		{"relative", "bin/sessiond", "invalid_params", "absolute path"},
		{"NUL", "/usr/bin/sessi\x00ond", "invalid_params", "binary: must not contain a NUL byte"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Call(ctx10(t), "daemon.upgrade", api.UpgradeParams{Binary: tc.binary}, nil)
			var re *rpc.Error
			if !errors.As(err, &re) || re.Reason != tc.reason || !strings.Contains(fmt.Sprint(re.Data["cause"])+re.Message, tc.cause) {
				t.Fatalf("upgrade to %s: %v (data %v); want %s naming %q", tc.binary, err, dataOf(re), tc.reason, tc.cause)
			}
			if strings.ContainsRune(re.Message+fmt.Sprint(re.Data), 0) {
				t.Fatalf("a raw NUL in the answer: %q %v", re.Message, dataOf(re))
			}
			if tc.reason == "upgrade_refused" && re.Code != -32024 {
				t.Fatalf("code %d, want -32024", re.Code)
			}
		})
	}
	after := d.Status(t)
	if after.PID != before.PID || after.Version != before.Version || after.StartedAt != before.StartedAt {
		t.Fatalf("daemon changed: %+v -> %+v", before, after)
	}
	send(t, c, id, "still here")
	evs := waitJournal(t, func() *rpc.Client { return c }, id, "turn.completed", turnDone)
	if got := deltaText(t, evs); got != "echo: still here" {
		t.Fatalf("after the refusals the turn answered %q", got)
	}
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil || s.PID != pid {
		t.Fatalf("session after refusals: pid %d (want %d), %v", s.PID, pid, err)
	}
}

func dataOf(re *rpc.Error) map[string]any {
	if re == nil {
		return nil
	}
	return re.Data
}

// TestE2EUpgradeRefusedCallsInFlight: a hold still starting its child
// past the quiesce bound (step_timeout) refuses the upgrade; the hold then
// completes and the daemon carries on.
func TestE2EUpgradeRefusedCallsInFlight(t *testing.T) {
	cfg := fmt.Sprintf("step_timeout = \"1s\"\n[providers.slow]\ncommand = [%q, \"provider\", \"echo\", \"--slow-start\", \"4000\"]\n",
		daemontest.Binary(t))
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "slow", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		held <- d.Client(t).Call(ctxN(t, 60*time.Second), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil)
	}()
	for deadline := time.Now().Add(20 * time.Second); len(daemontest.TaggedProcesses(d.StateID)) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the slow child never started")
		}
		time.Sleep(10 * time.Millisecond) // another process appearing: nothing to wait on
	}
	err := c.Call(ctxN(t, 30*time.Second), "daemon.upgrade", api.UpgradeParams{}, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "upgrade_refused" || !strings.Contains(fmt.Sprint(re.Data["cause"]), "calls in flight") {
		t.Fatalf("upgrade with a hold in flight: %v (%v)", err, dataOf(re))
	}
	if err := <-held; err != nil {
		t.Fatalf("the hold in flight failed: %v", err)
	}
}

// TestE2EUpgradeKilledAfterExec: the new image is SIGKILLed right after
// the exec (a wrapper that kills itself in place of serving); the next
// start reaps everything: no tagged process is left, and each journal
// closes its open turn and ends the session as after a crash.
func TestE2EUpgradeKilledAfterExec(t *testing.T) {
	testUpgradeDies(t, `case "$1" in version) exec "$REAL" "$@";; esac; kill -KILL $$`)
}

// TestE2EUpgradeCannotAdopt: a new image that cannot adopt the handoff
// (here: written for another store) logs why and exits 1; the next start
// reaps as after a crash.
func TestE2EUpgradeCannotAdopt(t *testing.T) {
	d := testUpgradeDies(t, `case "$1" in version) exec "$REAL" "$@";; esac
sed -i 's/"stateId":"[^"]*"/"stateId":"someone-else"/' "$SESSIOND_HANDOFF"; exec "$REAL" "$@"`)
	if !strings.Contains(d.Log.String(), "cannot adopt the live upgrade") {
		t.Fatalf("no 'cannot adopt' line:\n%s", d.Log.String())
	}
}

func testUpgradeDies(t *testing.T, body string) *daemontest.Daemon {
	return testUpgradeDiesWith(t, "", body)
}

// testUpgradeDiesWith is testUpgradeDies on a daemon with config.
func testUpgradeDiesWith(t *testing.T, config, body string) *daemontest.Daemon {
	next := script(t, body)
	d := daemontest.Start(t, daemontest.Options{Config: config})
	c := d.Client(t)
	idle, _ := liveSession(t, c)
	busy, _ := liveSession(t, c)
	send(t, c, busy, "/approve")
	waitJournal(t, func() *rpc.Client { return c }, busy, "approval.requested", has(event.ApprovalRequested))
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: next}, nil); err == nil {
		t.Fatal("the upgrade to a dying image answered")
	}
	select {
	case <-d.Exited():
	case <-time.After(60 * time.Second):
		t.Fatal("the new image did not die")
	}
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir})
	if pids := daemontest.TaggedProcesses(d2.StateID); len(pids) != 0 {
		t.Fatalf("processes left after the restart: %v\n%s", pids, d2.Log.String())
	}
	c2 := d2.Client(t)
	for _, id := range []string{idle, busy} {
		evs := readJournal(t, c2, id)
		if last := evs[len(evs)-1]; last.Type != event.LeaseReleased || count(evs, event.SessionEnded) != 1 {
			t.Fatalf("session %s ends with %s: %s", id, last.Type, tail(evs, 6))
		}
	}
	if evs := readJournal(t, c2, busy); !strings.Contains(tail(evs, 6), "daemon_restart") {
		t.Fatalf("the open turn was not closed daemon_restart: %s", tail(evs, 6))
	}
	return d
}

// TestE2EUpgradeTruncatedHandoffShared: the new image finds the handoff
// cut in half (its shared runtime's and sessions' state unreadable): it
// takes it for no handoff of its own ("unreadable"), cannot open the store
// (the old image's lock, inherited, is still held) and exits; the next
// start reaps the runtime and every session ends as after a crash,
// nothing left running.
func TestE2EUpgradeTruncatedHandoffShared(t *testing.T) {
	d := testUpgradeDiesWith(t, "[providers.echo]\nprocesses = \"account\"\n", `case "$1" in version) exec "$REAL" "$@";; esac
n=$(wc -c < "$SESSIOND_HANDOFF"); head -c $((n / 2)) "$SESSIOND_HANDOFF" > "$SESSIOND_HANDOFF.cut"; mv "$SESSIOND_HANDOFF.cut" "$SESSIOND_HANDOFF"
exec "$REAL" "$@"`)
	if log := d.Log.String(); !strings.Contains(log, "ignoring SESSIOND_HANDOFF") || !strings.Contains(log, "unreadable") {
		t.Fatalf("no line on the unreadable handoff:\n%s", log)
	}
}

// TestE2ECtlUpgrade: `ctl upgrade --binary` prints the versions and the
// unchanged pid; `ctl upgrade` to a refusing binary exits 1 naming
// upgrade_refused and its cause; `version --handoff` lists the formats,
// then the features, then the version.
func TestE2ECtlUpgrade(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{})
	pid := d.Status(t).PID
	from := daemontest.ReportedVersion(t, daemontest.Binary(t))
	code, out, errOut := runCtl(t, d.Socket, t.TempDir(), "upgrade", "--binary", v2)
	if want := fmt.Sprintf("upgraded %s -> %s (pid %d, same process)", from, upgradeVersion, pid); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("ctl upgrade: %d %q %q; want %q", code, out, errOut, want)
	}
	old := script(t, `echo sessiond-handoff/0`)
	code, _, errOut = runCtl(t, d.Socket, t.TempDir(), "upgrade", "--binary", old)
	if code != 1 || !strings.Contains(errOut, "[upgrade_refused]") || !strings.Contains(errOut, "not sessiond-handoff/1") {
		t.Fatalf("ctl upgrade to an old binary: %d %q", code, errOut)
	}
	if st := d.Status(t); st.PID != pid || st.Version != upgradeVersion {
		t.Fatalf("after a refusal: %+v", st)
	}
	b, err := exec.Command(v2, "version", "--handoff").Output()
	if err != nil || string(b) != "sessiond-handoff/1\nsessiond-handoff/2\nsessiond-handoff+inotify\nversion "+upgradeVersion+"\n" {
		t.Fatalf("version --handoff: %q %v", b, err)
	}
}
