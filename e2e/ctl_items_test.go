package e2e

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/golden"
)

// startCtlSend creates an echo session with ctl in dir and starts `ctl
// send ID text`, returning the session, the command and its stdout.
func startCtlSend(t *testing.T, d *daemontest.Daemon, dir, text string) (api.SessionInfo, *exec.Cmd, *bufio.Scanner) {
	t.Helper()
	code, out, errOut := runCtl(t, d.Socket, dir, "--json", "create", "--provider", "echo", "--cwd", dir)
	var s api.SessionInfo
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	cmd := exec.Command(daemontest.Binary(t), "ctl", "--socket", d.Socket, "send", s.SessionID, text)
	cmd.Env = ctlEnviron(t)
	sysx.Tie(cmd, syscall.SIGKILL)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return s, cmd, bufio.NewScanner(stdout)
}

// TestE2ECtlRendersItems: `ctl send` of an echo /work turn prints the
// plan, the command with its output's tail and exit code, the file change,
// an approval with the `ctl respond` line that answers it, and the turn's
// token use (golden file testdata/ctl_send_work.golden); running the
// respond line lets the turn finish. A decision outside the options is
// refused naming them.
func TestE2ECtlRendersItems(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	dir := t.TempDir()
	s, cmd, sc := startCtlSend(t, d, dir, "/work")
	var code int
	var out, errOut string
	var lines []string
	var answer []string
	for answer == nil && sc.Scan() {
		lines = append(lines, sc.Text())
		if f := strings.Fields(sc.Text()); len(f) == 9 && f[0] == "answer:" {
			answer = f
		}
	}
	if answer == nil {
		t.Fatalf("no respond line in %q", lines)
	}
	if answer[8] != "approve|approveForSession|deny|cancel" || answer[6] != s.SessionID || answer[3] != "--socket" || answer[4] != d.Socket {
		t.Fatalf("respond line %q", answer)
	}
	code, _, errOut = runCtl(t, d.Socket, dir, "respond", s.SessionID, answer[7], "maybe")
	if code == 0 || !strings.Contains(errOut, "invalid_params") {
		t.Fatalf("respond maybe: %d %s", code, errOut)
	}
	if code, out, errOut = runCtl(t, d.Socket, dir, "respond", s.SessionID, answer[7], "approve"); code != 0 {
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
	golden.Check(t, "ctl_send_work.golden", strings.NewReplacer(s.SessionID, "SESSION", answer[7], "REQUEST", d.Socket, "SOCKET").Replace(all))
}

// TestE2ECtlRendersQuestion: `ctl send` of an echo /ask turn (codex's
// requestUserInput) prints the question with its id and options and a
// respond line that carries --answers; running it answers the question
// (golden file testdata/ctl_send_ask.golden).
func TestE2ECtlRendersQuestion(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	dir := t.TempDir()
	s, cmd, sc := startCtlSend(t, d, dir, "/ask")
	var lines []string
	var respond string
	for respond == "" && sc.Scan() {
		lines = append(lines, sc.Text())
		if r, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "answer: "); ok {
			respond = r
		}
	}
	// The line as printed (its --socket included), with the operator's
	// choice for the placeholder, run through a shell as a person pastes
	// it.
	line := strings.Replace(respond, "ANSWER", "hello", 1)
	sh := exec.Command("/bin/sh", "-c", line)
	sh.Env = ctlEnviron(t)
	if b, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s\nsend printed:\n%s", line, err, b, strings.Join(lines, "\n"))
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ctl send: %v\n%s", err, strings.Join(lines, "\n"))
	}
	all := strings.Join(lines, "\n") + "\n"
	if !strings.Contains(all, "(answer: hello)") {
		t.Fatalf("the answer did not reach the provider:\n%s", all)
	}
	f := strings.Fields(respond)
	golden.Check(t, "ctl_send_ask.golden", strings.NewReplacer(s.SessionID, "SESSION", f[6], "REQUEST", d.Socket, "SOCKET").Replace(all))
}

// TestE2ECtlFollowRendersWork: `ctl attach --follow` renders a /work turn
// sent by another client as `ctl send` does, the user's text first; the
// respond line it prints answers the approval (golden file
// testdata/ctl_follow_work.golden). A second `attach --follow` after the
// turn renders the history exactly as the first rendered it live.
func TestE2ECtlFollowRendersWork(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	// Whether it subscribes before the send or after, the turn reads the
	// same: history is rendered like live events.
	follow := startCtl(t, d.Socket, "attach", s.SessionID, "--follow")
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "/work"}, nil); err != nil {
		t.Fatal(err)
	}
	var rendered []string
	var request string
	next := func() string {
		t.Helper()
		select {
		case l := <-follow.lines:
			rendered = append(rendered, l)
			return l
		case <-follow.exited:
			t.Fatalf("attach --follow ended:\n%s", follow.output())
		case <-time.After(60 * time.Second):
			t.Fatalf("attach --follow stopped printing:\n%s", follow.output())
		}
		return ""
	}
	for request == "" {
		if f := strings.Fields(next()); len(f) == 9 && f[0] == "answer:" {
			request = f[7]
		}
	}
	if code, out, errOut := runCtl(t, d.Socket, t.TempDir(), "respond", s.SessionID, request, "approve"); code != 0 {
		t.Fatalf("respond: %d %s %s", code, out, errOut)
	}
	for !strings.HasPrefix(next(), "tokens: ") {
	}
	golden.Check(t, "ctl_follow_work.golden",
		strings.NewReplacer(s.SessionID, "SESSION", request, "REQUEST", d.Socket, "SOCKET").Replace(strings.Join(rendered, "\n")+"\n"))

	again := startCtl(t, d.Socket, "attach", s.SessionID, "--follow")
	var replay []string
	for len(replay) < len(rendered) {
		select {
		case l := <-again.lines:
			replay = append(replay, l)
		case <-again.exited:
			t.Fatalf("second attach --follow ended:\n%s", again.output())
		case <-time.After(60 * time.Second):
			t.Fatalf("second attach --follow printed only:\n%s", again.output())
		}
	}
	if got, want := strings.Join(replay, "\n"), strings.Join(rendered, "\n"); got != want {
		t.Fatalf("history rendered unlike the live events:\n--- history\n%s\n--- live\n%s", got, want)
	}
}
