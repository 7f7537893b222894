package codextest_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/provider/codex"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// adapterProc is the real codex app-server under one CODEX_HOME driven by
// the codex adapter directly (no daemon): what an account's process does
// with a thread carried into its home.
type adapterProc struct {
	a   provider.Adapter
	res provider.StartResult
	evs chan event.Draft
	cmd *exec.Cmd
	in  interface{ Close() error }
}

// startAdapter spawns codex under home (HOME an empty dir), in cwd, and
// starts the adapter: a fresh thread, or a resume of threadID.
func startAdapter(t *testing.T, home, cwd, threadID string) (*adapterProc, error) {
	t.Helper()
	cmd := exec.Command(codextest.Binary(t), "app-server")
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "HOME="+t.TempDir())
	cmd.Dir = cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &adapterProc{evs: make(chan event.Draft, 4096), cmd: cmd, in: in}
	t.Cleanup(p.stop)
	p.a = codex.New(provider.Options{In: in, Out: out, Cwd: cwd, ThreadID: threadID,
		Emit: func(d event.Draft) { p.evs <- d }})
	p.res, err = p.a.Start(providertest.Ctx(t))
	return p, err
}

// stop ends codex as the daemon does (stdin EOF), then its group.
func (p *adapterProc) stop() {
	_ = p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// turn sends text as turn id and returns its turn.completed.
func (p *adapterProc) turn(t *testing.T, id, text string) event.TurnCompletedData {
	t.Helper()
	if err := p.a.StartTurn(providertest.Ctx(t), id, text); err != nil {
		t.Fatal(err)
	}
	ctx := providertest.Ctx(t)
	for {
		select {
		case d := <-p.evs:
			if d.Type == event.TurnCompleted && d.TurnID == id {
				var tc event.TurnCompletedData
				if err := json.Unmarshal(d.Data, &tc); err != nil {
					t.Fatal(err)
				}
				return tc
			}
		case <-ctx.Done():
			t.Fatalf("turn %s: no turn.completed", id)
		}
	}
}

// envOf is an account's environment as a Move reads it.
func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}
