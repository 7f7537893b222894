package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// ctlEnviron is the environment e2e tests run ctl in: PATH first finds the
// binary under test as `sessiond` (a symlink), as for an installed one, so
// its hints read `sessiond …`. TestE2ECtlHintNamesBinary runs it off PATH.
func ctlEnviron(t testing.TB) []string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(daemontest.Binary(t), filepath.Join(dir, "sessiond")); err != nil {
		t.Fatal(err)
	}
	env := []string{"GORACE=atexit_sleep_ms=0"}
	for _, kv := range os.Environ() {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			env = append(env, "PATH="+dir+string(os.PathListSeparator)+p)
		} else {
			env = append(env, kv)
		}
	}
	return env
}

// TestE2ECtlHintNamesBinary: a ctl that PATH does not find as `sessiond`
// (bin/sessiond run from a checkout) names itself by its absolute path in
// the hints it prints, and the --socket it was given (shell-quoted): the
// approval's respond line, pasted as printed into a shell whose PATH has
// no sessiond and whose environment names no socket, answers the
// approval; the no-daemon hint names `ABS serve --socket S`.
func TestE2ECtlHintNamesBinary(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin", "sessiond")
	os.Mkdir(filepath.Dir(bin), 0o755)
	copyFile(t, daemontest.Binary(t), bin)
	env := []string{"GORACE=atexit_sleep_ms=0", "PATH=/usr/bin:/bin", "HOME=" + dir}
	if _, err := exec.LookPath("/usr/bin/sessiond"); err == nil {
		t.Fatal("/usr/bin/sessiond exists: this test needs a PATH without sessiond")
	}

	var s api.SessionInfo
	if err := d.Client(t).Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir}, &s); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bin/sessiond", "ctl", "--socket", d.Socket, "send", s.SessionID, "/work")
	cmd.Dir, cmd.Env = dir, env
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
	var answer string
	for answer == "" && sc.Scan() {
		lines = append(lines, sc.Text())
		if a, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "answer: "); ok {
			answer = a
		}
	}
	if want := bin + " ctl --socket " + shellWord(d.Socket) + " respond " + s.SessionID + " "; !strings.HasPrefix(answer, want) {
		t.Fatalf("respond line %q, want it to start %q; printed:\n%s", answer, want, strings.Join(lines, "\n"))
	}
	// The choices come last: approve|deny; the rest is pasted as printed.
	line := answer[:strings.LastIndexByte(answer, ' ')] + " approve"
	sh := exec.Command("/bin/sh", "-c", line)
	sh.Dir, sh.Env = t.TempDir(), env
	if b, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("pasted %q: %v\n%s", line, err, b)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ctl send: %v\n%s", err, strings.Join(lines, "\n"))
	}

	noneSock := filepath.Join(dir, "no daemon's", "s.sock")
	none := exec.Command("bin/sessiond", "ctl", "--socket", noneSock, "ls")
	none.Dir, none.Env = dir, env
	out, _ := none.CombinedOutput()
	if want := "start one with `" + bin + " serve --socket '" + strings.ReplaceAll(noneSock, "'", `'\''`) + "'`"; !strings.Contains(string(out), want) {
		t.Fatalf("no daemon: %q, want %q", out, want)
	}
}

// shellWord quotes s for a POSIX shell as ctl prints it (plain words as
// they are, anything else in single quotes).
func shellWord(s string) string {
	if regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,-]+$`).MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
