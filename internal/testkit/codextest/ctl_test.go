package codextest_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// `ctl send` against the real codex: the command shows with its approval
// and the `ctl respond` line; running that line lets the command run, and
// the output shows its exit code and the streamed reply.
func TestCodexCtlSend(t *testing.T) {
	m := codextest.NewModel(t, codextest.Exec("call_1", "echo from-codex"), codextest.Text("it ", "ran"))
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, "")))
	c := providertest.Dial(t, d, client).C
	var info struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.Call(providertest.Ctx(t), "agentSession.create", map[string]string{"provider": "codex", "cwd": t.TempDir()}, &info); err != nil {
		t.Fatal(err)
	}
	ctl := func(args ...string) *exec.Cmd {
		cmd := exec.Command(daemontest.Binary(t), append([]string{"ctl", "--socket", d.Socket}, args...)...)
		cmd.Env = append(cmd.Environ(), "GORACE=atexit_sleep_ms=0")
		sysx.Tie(cmd, syscall.SIGKILL)
		return cmd
	}
	send := ctl("send", info.SessionID, "run it")
	stdout, err := send.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	send.Stderr = &stderr
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var lines []string
	var answer []string
	for answer == nil && sc.Scan() {
		lines = append(lines, sc.Text())
		// answer: BIN ctl [--socket S] respond ID REQUEST approve|…
		if f := strings.Fields(sc.Text()); len(f) >= 7 && f[0] == "answer:" {
			if i := slices.Index(f, "respond"); i >= 3 && i+4 == len(f) {
				answer = f[i-3:]
			}
		}
	}
	if answer == nil {
		t.Fatalf("no respond line: %q %s", lines, stderr.String())
	}
	if out, err := ctl("respond", answer[4], answer[5], "approve").CombinedOutput(); err != nil {
		t.Fatalf("ctl respond: %v %s", err, out)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := send.Wait(); err != nil {
		t.Fatalf("ctl send: %v\n%s\n%s", err, strings.Join(lines, "\n"), stderr.String())
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"$ /bin/bash -lc 'echo from-codex'", "? command approval", "  exit 0", "it ran"} {
		if !strings.Contains(all, want) {
			t.Errorf("ctl send output lacks %q:\n%s", want, all)
		}
	}
}
