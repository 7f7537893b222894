package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/ctl"
)

// TestE2EStoreNotRegularFileRefused: a sessiond.db that is a named pipe
// (a read of one waits for a writer for good) or a directory is refused
// at once by serve and by ctl doctor alike: exit 1, the file named, the
// move-aside fix line, one store problem, and the file left as it was.
func TestE2EStoreNotRegularFileRefused(t *testing.T) {
	for _, kind := range []string{"fifo", "directory"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "sessiond.db")
			var err error
			if kind == "fifo" {
				err = syscall.Mkfifo(db, 0o600)
			} else {
				err = os.Mkdir(db, 0o700)
			}
			if err != nil {
				t.Fatal(err)
			}
			fix := "mv " + db + " " + db + ".corrupt-"

			code, stdout, stderr := runCtl(t, filepath.Join(t.TempDir(), "none.sock"), t.TempDir(), "--json", "doctor", "--state-dir", dir)
			assertRefusal(t, "doctor", code, stdout+stderr, db, fix)
			var rep ctl.DoctorReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(problemsOf(rep, "store")) != 1 {
				t.Fatalf("doctor --json: %v, want one store problem:\n%s", err, stdout)
			}
			code, out := runDaemonExpectExit(t, "--socket", filepath.Join(t.TempDir(), "run", "s.sock"), "--state-dir", dir)
			assertRefusal(t, "serve", code, out, db, fix)

			fi, err := os.Lstat(db)
			if err != nil || fi.Mode().IsRegular() || (kind == "fifo") != (fi.Mode()&os.ModeNamedPipe != 0) {
				t.Fatalf("%s after the refusals: %v %v, want it as it was", db, fi, err)
			}
		})
	}
}
