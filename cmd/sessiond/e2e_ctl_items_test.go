package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/daemontest"
	"github.com/sessiond/sessiond/internal/sysx"
)

// TestE2ECtlRendersItems: `ctl send` of an echo /work turn prints the
// plan, the command with its output's tail and exit code, the file change,
// an approval with the `ctl respond` line that answers it, and the turn's
// token use (golden file testdata/ctl_send_work.golden); running the
// respond line lets the turn finish. A decision outside the options is
// refused naming them.
func TestE2ECtlRendersItems(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	dir := t.TempDir()
	code, out, errOut := runCtl(t, d.Socket, dir, "--json", "create", "--provider", "echo", "--cwd", dir)
	var s api.SessionInfo
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	cmd := exec.Command(daemontest.Binary(t), "ctl", "--socket", d.Socket, "send", s.SessionID, "/work")
	cmd.Env = append(cmd.Environ(), "GORACE=atexit_sleep_ms=0")
	sysx.Tie(cmd, syscall.SIGKILL)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var lines []string
	var answer []string
	for answer == nil && sc.Scan() {
		lines = append(lines, sc.Text())
		if f := strings.Fields(sc.Text()); len(f) == 7 && f[0] == "answer:" {
			answer = f
		}
	}
	if answer == nil {
		t.Fatalf("no respond line in %q", lines)
	}
	if answer[6] != "approve|approveForSession|deny|cancel" || answer[4] != s.SessionID {
		t.Fatalf("respond line %q", answer)
	}
	code, _, errOut = runCtl(t, d.Socket, dir, "respond", s.SessionID, answer[5], "maybe")
	if code == 0 || !strings.Contains(errOut, "invalid_params") {
		t.Fatalf("respond maybe: %d %s", code, errOut)
	}
	if code, out, errOut = runCtl(t, d.Socket, dir, "respond", s.SessionID, answer[5], "approve"); code != 0 {
		t.Fatalf("respond: %d %s %s", code, out, errOut)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ctl send: %v\n%s", err, strings.Join(lines, "\n"))
	}
	all := strings.Join(lines, "\n") + "\n"
	// The whole turn as a person reads it, ids replaced by placeholders.
	golden(t, "ctl_send_work.golden", strings.NewReplacer(s.SessionID, "SESSION", answer[5], "REQUEST").Replace(all))
}
