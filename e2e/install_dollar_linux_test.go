package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecStartDollarVerifies: a binary path with a `$` is written into
// ExecStart as it is, and systemd finds that executable: the first word
// of ExecStart is a literal path, which systemd neither expands nor
// unescapes (`$$` there would name a file that does not exist), checked
// with systemd-analyze verify.
func TestExecStartDollarVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze not found: install it (apt-get install systemd)")
	}
	cfg := t.TempDir()
	to := filepath.Join(t.TempDir(), "a$b", "sessiond")
	if code, out, errOut := runInstall(t, cfg, "--binary", to); code != 0 {
		t.Fatalf("install-service --binary %s: exit %d\n%s%s", to, code, out, errOut)
	}
	unit := filepath.Join(cfg, "systemd", "user", "sessiond.service")
	if b, _ := os.ReadFile(unit); !strings.Contains(string(b), "\nExecStart="+to+" serve\n") {
		t.Fatalf("ExecStart does not name %s as it is:\n%s", to, b)
	}
	if out, err := exec.Command(analyze, "verify", "--man=no", unit).CombinedOutput(); err != nil {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unit, err, out)
	}
}
