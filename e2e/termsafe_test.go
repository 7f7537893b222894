package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestCtlEscapesSocketPath: the socket path ctl names in its errors is
// escaped like every other text it prints.
func TestCtlEscapesSocketPath(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "x\x1b]0;PWN\x07\x1b[31m\ry.sock")
	for _, args := range [][]string{{"--socket", sock, "status"}, {"--socket", sock, "doctor"}} {
		cmd := exec.Command(daemontest.Binary(t), append([]string{"ctl"}, args...)...)
		out, _ := cmd.CombinedOutput()
		if strings.ContainsAny(string(out), "\x1b\x07\r") {
			t.Fatalf("ctl %v printed raw control characters: %q", args, out)
		}
	}
}
