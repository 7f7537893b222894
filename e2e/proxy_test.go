package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// proxyCmd is `sessiond proxy ARGS` with pipes on stdin and stdout.
type proxyCmd struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
}

func startProxy(t *testing.T, args ...string) *proxyCmd {
	t.Helper()
	p := &proxyCmd{cmd: exec.Command(daemontest.Binary(t), append([]string{"proxy"}, args...)...)}
	p.cmd.Env = ctlEnviron(t)
	p.cmd.Stderr = &p.stderr
	sysx.Tie(p.cmd, syscall.SIGKILL)
	in, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin, p.stdout = in, bufio.NewReader(out)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	return p
}

// wait reads stdout to its EOF (it must come) and returns the lines read
// and the proxy's exit code.
func (p *proxyCmd) wait(t *testing.T) ([]string, int) {
	t.Helper()
	var lines []string
	for {
		l, err := p.stdout.ReadString('\n')
		if l != "" {
			lines = append(lines, strings.TrimSuffix(l, "\n"))
		}
		if err != nil {
			break
		}
	}
	err := p.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return lines, ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return lines, 0
}

// TestE2EProxy: the proxy copies a newline-framed conversation both ways;
// the client's EOF is a half-close: every answer to what it sent still
// arrives before stdout's EOF, and the proxy exits 0. (Mutation: closing
// stdout at stdin's EOF, before the socket drained, loses the answers.)
func TestE2EProxy(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	p := startProxy(t, "--socket", d.Socket)
	const n = 300
	var req strings.Builder
	req.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"client":{"name":"proxy-e2e","version":"0"},"capabilities":[]}}` + "\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&req, `{"jsonrpc":"2.0","id":%d,"method":"daemon.status"}`+"\n", i)
	}
	if _, err := io.WriteString(p.stdin, req.String()); err != nil {
		t.Fatal(err)
	}
	p.stdin.Close()
	lines, code := p.wait(t)
	if code != exitcode.OK {
		t.Fatalf("proxy exit %d, want 0: %s", code, p.stderr.String())
	}
	seen := map[int]bool{}
	for _, l := range lines {
		var m struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		if m.ID != nil && m.Result != nil {
			seen[*m.ID] = true
		}
	}
	if len(seen) != n+1 {
		t.Fatalf("%d answers arrived before stdout's EOF, want %d (initialize + %d calls)", len(seen), n+1, n)
	}
}

// TestE2EProxyBadInput: garbage from the client is the daemon's to answer
// (it closes the connection); the proxy then closes stdout and exits 1.
// With no daemon and none startable (a config the daemon refuses) the
// proxy exits 3 naming why.
func TestE2EProxyBadInput(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	p := startProxy(t, "--socket", d.Socket)
	if _, err := io.WriteString(p.stdin, "garbage that is no frame\n"); err != nil {
		t.Fatal(err)
	}
	lines, code := p.wait(t)
	if code != exitcode.Error || len(lines) != 0 {
		t.Fatalf("garbage: exit %d with %q, want 1 and nothing: %s", code, lines, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "the daemon closed the connection") {
		t.Fatalf("stderr: %s", p.stderr.String())
	}

	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("no_such_key = [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(shortDir(t), "s.sock")
	p = startProxy(t, "--socket", sock, "--state-dir", filepath.Join(dir, "state"), "--config", bad)
	p.stdin.Close()
	if _, code := p.wait(t); code != exitcode.NoDaemon {
		t.Fatalf("no daemon: exit %d, want 3: %s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "no daemon can be reached") {
		t.Fatalf("stderr: %s", p.stderr.String())
	}
}

// TestE2EProxyStartsDaemonOnce: two proxies started at once with no
// daemon: both connect, to one daemon (the same pid answers both).
func TestE2EProxyStartsDaemonOnce(t *testing.T) {
	sock := filepath.Join(shortDir(t), "s.sock")
	state := t.TempDir()
	ps := []*proxyCmd{startProxy(t, "--socket", sock, "--state-dir", state), startProxy(t, "--socket", sock, "--state-dir", state)}
	pids := make([]int, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.WriteString(p.stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"client":{"name":"proxy-e2e","version":"0"},"capabilities":[]}}`+"\n"+
				`{"jsonrpc":"2.0","id":1,"method":"daemon.status"}`+"\n")
			p.stdin.Close()
			lines, code := p.wait(t)
			if code != 0 || len(lines) != 2 {
				t.Errorf("proxy %d: exit %d, %q: %s", i, code, lines, p.stderr.String())
				return
			}
			var st struct {
				Result rpc.Status `json:"result"`
			}
			if err := json.Unmarshal([]byte(lines[1]), &st); err != nil {
				t.Errorf("status: %q", lines[1])
			}
			pids[i] = st.Result.PID
		}()
	}
	wg.Wait()
	if pids[0] != pids[1] || pids[0] == 0 {
		t.Fatalf("pids %v: want one daemon", pids)
	}
	stopDaemon(t, sock, state, pids[0])
}

// stopDaemon shuts down a daemon the test did not start itself (a
// proxy's) and waits for its exit: the store's flock is free again.
func stopDaemon(t *testing.T, sock, state string, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, sock, rpc.ClientOptions{Name: "e2e"})
	if err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal(err)
	}
	c.Call(ctx, "daemon.shutdown", nil, nil)
	<-c.Done()
	c.Close()
	f, err := os.Open(filepath.Join(state, "sessiond.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
}

// shortDir is a temp dir with a short path (sun_path is 108 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
