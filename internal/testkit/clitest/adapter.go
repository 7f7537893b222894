package clitest

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// Proc is a CLI driven by an adapter: what the adapter emits is on Evs.
type Proc struct {
	A   provider.Adapter
	Evs chan event.Draft
	cmd *exec.Cmd
	in  io.Closer
}

// StartAdapter starts cmd (Start) and an adapter made by newAdapter over
// its stdio, with o's other fields (In, Out, Emit are set here), and
// starts the adapter under ctx. The CLI is stopped (Stop) when t ends.
func StartAdapter(ctx context.Context, t testing.TB, cmd *exec.Cmd, newAdapter func(provider.Options) provider.Adapter, o provider.Options) (*Proc, provider.StartResult, error) {
	t.Helper()
	in, out := Start(t, cmd)
	p := &Proc{Evs: make(chan event.Draft, 4096), cmd: cmd, in: in}
	t.Cleanup(p.Stop)
	o.In, o.Out, o.Emit = in, out, func(d event.Draft) { p.Evs <- d }
	p.A = newAdapter(o)
	res, err := p.A.Start(ctx)
	return p, res, err
}

// Stop ends the CLI as the daemon does (stdin EOF), then, after 10s, its
// group.
func (p *Proc) Stop() {
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

// Turn sends text as turn id and returns its turn.completed, failing t
// when ctx ends first.
func (p *Proc) Turn(ctx context.Context, t testing.TB, id, text string) event.TurnCompletedData {
	t.Helper()
	if err := p.A.StartTurn(ctx, id, text); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case d := <-p.Evs:
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
