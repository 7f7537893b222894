package e2e

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// heldCheck is a next binary whose `version --handoff` waits until the
// returned fifo is opened for writing and closed: opening it (which
// blocks until the check reads it) says the upgrade is in progress.
func heldCheck(t *testing.T) (bin, fifo string) {
	fifo = mkfifo(t)
	return script(t, `case "$1 $2" in "version --handoff") cat `+fifo+` >/dev/null;; esac; exec "$REAL" "$@"`), fifo
}

// refusedCause is data.cause of an upgrade_refused, or fails.
func refusedCause(t *testing.T, what string, err error) string {
	t.Helper()
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "upgrade_refused" {
		t.Fatalf("%s: %v; want upgrade_refused", what, err)
	}
	return fmt.Sprint(re.Data["cause"])
}

// TestE2EUpgradeInProgress: a daemon.upgrade while another one runs (its
// new binary's check held) is answered upgrade_refused {cause:
// "in_progress"} on its own connection, which stays open; the first
// upgrade then completes.
func TestE2EUpgradeInProgress(t *testing.T) {
	bin, fifo := heldCheck(t)
	d := daemontest.Start(t, daemontest.Options{})
	id, pid := liveSession(t, d.Client(t))
	first := make(chan error, 1)
	fc := d.Client(t)
	go func() {
		first <- fc.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: bin}, nil)
	}()
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // the first upgrade's check is running
	if err != nil {
		t.Fatal(err)
	}
	c := d.Client(t)
	err = c.Call(ctx10(t), "daemon.upgrade", api.UpgradeParams{Binary: bin}, nil)
	if cause := refusedCause(t, "a second upgrade while one runs", err); cause != "in_progress" {
		t.Fatalf("second upgrade: cause %q, want in_progress", cause)
	}
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil || s.PID != pid {
		t.Fatalf("the refused caller's connection: %+v %v", s, err)
	}
	f.Close()
	if err := <-first; err != nil {
		t.Fatalf("the first upgrade: %v\n%s", err, d.Log.String())
	}
}

// TestE2EUpgradeRacing: two daemon.upgrade calls sent at once, on two
// connections, ten times: each time exactly one upgrades and the other
// is answered upgrade_refused {cause: "in_progress"}; no call goes
// unanswered (the loser's call reaches the daemon while the winner's
// binary check runs).
func TestE2EUpgradeRacing(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	bin := daemontest.Binary(t)
	lost := 0
	for i := range 10 {
		cs := []*rpc.Client{d.Client(t), d.Client(t)}
		errs := make([]error, len(cs))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[j] = c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: bin}, nil)
			}()
		}
		close(start)
		wg.Wait()
		ok, refused := 0, 0
		for _, err := range errs {
			var re *rpc.Error
			switch {
			case err == nil:
				ok++
			case errors.As(err, &re) && re.Reason == "upgrade_refused" && re.Data["cause"] == "in_progress":
				refused++
			case re != nil:
				t.Errorf("#%d: %v (%v); want upgrade_refused {cause: in_progress}", i, err, dataOf(re))
			default:
				lost++
				t.Logf("#%d: %v", i, err)
			}
		}
		if ok != 1 {
			t.Errorf("#%d: %d upgrades done, want 1: %v", i, ok, errs)
		}
		for _, c := range cs {
			c.Close()
		}
	}
	t.Logf("racing upgrades: 10 pairs, %d answers lost", lost)
	if lost != 0 {
		t.Fatalf("%d of 10 losers got no in_progress answer\n%s", lost, grepLines(d.Log.String(), "upgrade"))
	}
}

// TestE2EUpgradeDuringShutdown: SIGTERM while an upgrade's check runs:
// the running upgrade is abandoned with cause "shutting_down" (its check
// killed at once) and the shutdown runs whole (exit 0, no child left). An
// upgrade asked during the shutdown (refused shutting_down too) has too
// short a window to be hit from here: TestUpgradeGateShutdown pins it.
func TestE2EUpgradeDuringShutdown(t *testing.T) {
	bin, fifo := heldCheck(t)
	d := daemontest.Start(t, daemontest.Options{})
	liveSession(t, d.Client(t))
	first := make(chan error, 1)
	fc := d.Client(t)
	go func() {
		first <- fc.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: bin}, nil)
	}()
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // the first upgrade's check is running
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d.Cmd.Process.Signal(syscall.SIGTERM)
	if cause := refusedCause(t, "the upgrade the shutdown overtook", <-first); cause != "shutting_down" {
		t.Fatalf("the running upgrade: cause %q, want shutting_down\n%s", cause, d.Log.String())
	}
	if code := d.Wait(90 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM during the upgrade:\n%s", code, d.Log.String())
	}
	if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
		t.Fatalf("children left after the shutdown: %v", pids)
	}
}

// TestE2EUpgradeHoldsShutdownCall: a daemon.shutdown sent while an
// upgrade holds calls (here: waiting for a hold whose child starts
// slowly) is held like any call; the upgrade completes, the shutdown's
// connection closes unanswered after daemon.restarting, and the new image
// runs on (docs/protocol.md: send it again). One that lands before calls
// are held aborts the upgrade like a signal (shutting_down). A signal is
// never held (see TestE2EUpgradeDuringShutdown).
func TestE2EUpgradeHoldsShutdownCall(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	cfg := fmt.Sprintf("step_timeout = \"60s\"\n[providers.slow]\ncommand = [%q, \"provider\", \"echo\", \"--slow-start\", \"4000\"]\n",
		daemontest.Binary(t))
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "slow", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	hc := d.Client(t)
	go func() {
		held <- hc.Call(ctxN(t, 60*time.Second), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil)
	}()
	for deadline := time.Now().Add(20 * time.Second); len(daemontest.TaggedProcesses(d.StateID)) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the slow child never started")
		}
		time.Sleep(10 * time.Millisecond) // another process appearing: nothing to wait on
	}
	upgraded := make(chan error, 1)
	uc, sc := d.Client(t), d.Client(t)
	go func() {
		upgraded <- uc.Call(ctxN(t, 90*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, nil)
	}()
	waitLog(t, d, `"msg":"upgrade started"`)
	err := sc.Call(ctxN(t, 60*time.Second), "daemon.shutdown", nil, nil)
	uerr := <-upgraded
	<-held
	if uerr != nil {
		// The log line comes just before calls are held: a shutdown
		// that came first aborts the upgrade, answered, and runs whole.
		if cause := refusedCause(t, "the upgrade a daemon.shutdown overtook", uerr); cause != "shutting_down" || err != nil {
			t.Fatalf("upgrade refused %q, shutdown %v; want shutting_down and the shutdown answered", cause, err)
		}
		if code := d.Wait(90 * time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
		t.Log("the shutdown came before calls were held")
		return
	}
	var re *rpc.Error
	if err == nil || errors.As(err, &re) {
		t.Fatalf("daemon.shutdown held by the upgrade: %v; want its connection closed unanswered", err)
	}
	if st := d.Status(t); st.Version != upgradeVersion {
		t.Fatalf("after the upgrade: version %s, want the new image running", st.Version)
	}
}
