package e2e

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EUpgradeShutdownAbortsCheck: a shutdown (SIGTERM, or
// daemon.shutdown on another connection) while the new binary's
// `version --handoff` runs (held here, and it would be for good) aborts
// the check at once, its process group killed: the upgrade is answered
// upgrade_refused {cause: shutting_down} and the daemon exits 0 well
// within the check's 10 s bound, no child left.
func TestE2EUpgradeShutdownAbortsCheck(t *testing.T) {
	for _, how := range []string{"SIGTERM", "daemon.shutdown"} {
		t.Run(how, func(t *testing.T) {
			bin, fifo := heldCheck(t)
			d := daemontest.Start(t, daemontest.Options{})
			liveSession(t, d.Client(t))
			uc := d.Client(t)
			upgraded := make(chan error, 1)
			go func() {
				upgraded <- uc.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: bin}, nil)
			}()
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // the check is running; it never ends by itself while f is open
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			began := time.Now()
			if how == "SIGTERM" {
				d.Cmd.Process.Signal(syscall.SIGTERM)
			} else if err := d.Client(t).Call(ctx10(t), "daemon.shutdown", nil, nil); err != nil {
				t.Fatalf("daemon.shutdown: %v", err)
			}
			if cause := refusedCause(t, "the upgrade a shutdown overtook in its check", <-upgraded); cause != "shutting_down" {
				t.Fatalf("cause %q, want shutting_down\n%s", cause, d.Log.String())
			}
			if code := d.Wait(30 * time.Second); code != 0 {
				t.Fatalf("exit %d:\n%s", code, d.Log.String())
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Fatalf("the shutdown took %v: it waited for the check", took)
			}
			if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
				t.Fatalf("children left after the shutdown: %v", pids)
			}
		})
	}
}

// TestE2EUpgradeSignalAfterExec: a SIGTERM right after the exec (what
// `systemctl stop` right after `ctl upgrade` does) is a clean shutdown of
// the new image, not its death by the signal: the caller gets the
// upgrade's answer (it did complete), the daemon exits 0 and every
// adopted child is torn down: the signal comes once the new image adopts,
// before the place the old code installed its handler. (A case that held
// the new image on a FIFO swapped in for its config went with the config
// loader's refusal of anything but a regular file; without the early
// catch this case alone goes red.)
func TestE2EUpgradeSignalAfterExec(t *testing.T) {
	for _, when := range []string{"during startup"} {
		t.Run(when, func(t *testing.T) {
			v2 := daemontest.BinaryVersion(t, upgradeVersion)
			d := daemontest.Start(t, daemontest.Options{})
			c := d.Client(t)
			liveSession(t, c)
			var res api.UpgradeResult
			upgraded := make(chan error, 1)
			go func() {
				upgraded <- c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res)
			}()
			waitLog(t, d, `"msg":"adopting a live upgrade's sessions"`)
			d.Cmd.Process.Signal(syscall.SIGTERM)
			err := <-upgraded
			code := d.Wait(60 * time.Second)
			if err != nil || res.ToVersion != upgradeVersion {
				t.Fatalf("the upgrade a SIGTERM followed: %v %+v; want its answer\n%s", err, res, d.Log.String())
			}
			if code != 0 {
				t.Fatalf("exit %d after a SIGTERM right behind the upgrade:\n%s", code, d.Log.String())
			}
			if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
				t.Fatalf("children left after the shutdown: %v", pids)
			}
			if _, err := os.Stat(d.Socket); err == nil {
				t.Fatalf("the socket %s is left after the shutdown", d.Socket)
			}
		})
	}
}
