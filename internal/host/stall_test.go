package host

import (
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/sysx"
)

// stallGuard only turns a hang into a failure; the request timeout (an
// hour) is what the old behaviour waited for.
const stallGuard = time.Minute

// waitPipeFull returns once the child's stdin pipe is full: a write larger
// than the pipe is then blocked in the kernel, not merely under way.
func waitPipeFull(t *testing.T, c *proc.Child) {
	t.Helper()
	f, ok := c.Stdin().(*os.File)
	if !ok {
		t.Fatal("stdin is not a pipe")
	}
	rc, err := f.SyscallConn() // not Fd(): that would make the pipe blocking
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(stallGuard); ; {
		var queued, size int
		var qerr error
		if err := rc.Control(func(fd uintptr) {
			queued, size, qerr = sysx.PipeFill(int(fd))
		}); err != nil || qerr != nil {
			t.Fatalf("inspect stdin pipe: %v %v", err, qerr)
		}
		if queued >= size {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stdin pipe holds %d of %d bytes: the send never blocked", queued, size)
		}
		time.Sleep(time.Millisecond) // polling kernel state; nothing to subscribe to
	}
}

// A close (and shutdown) does not wait behind a send blocked on a provider
// that stopped reading: it cancels the write, the send fails at once, and
// the ladder kills the still-stopped child.
func TestTeardownCancelsSendBlockedOnStoppedProvider(t *testing.T) {
	for _, how := range []string{"close", "shutdown"} {
		t.Run(how, func(t *testing.T) { testTeardownCancelsBlockedSend(t, how) })
	}
}

func testTeardownCancelsBlockedSend(t *testing.T, how string) {
	f := newFixture(t)
	f.h.o.RequestTimeout = time.Hour
	ctx := context.Background()
	id := f.create("echo")
	f.hold(id, "h", "c1")
	child := f.lookupChild(t, id)
	pid := child.Identity().PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	type sendRes struct {
		r   api.SendResult
		err error
	}
	sent := make(chan sendRes, 1)
	go func() {
		r, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: strings.Repeat("x", 900<<10)})
		sent <- sendRes{r, err}
	}()
	waitPipeFull(t, child)

	type closeRes struct {
		r   api.CloseResult
		err error
	}
	closed := make(chan closeRes, 1)
	go func() {
		if how == "shutdown" {
			closed <- closeRes{api.CloseResult{Steps: stepsOK()}, f.h.Shutdown(ctx)}
			return
		}
		r, err := f.h.Close(ctx, id)
		closed <- closeRes{r, err}
	}()
	var cr closeRes
	select {
	case cr = <-closed:
	case <-time.After(stallGuard):
		syscall.Kill(pid, syscall.SIGCONT) // let the old behaviour unwind
		<-closed
		t.Fatalf("%s waited behind the send blocked on a stopped provider", how)
	}
	if cr.err != nil {
		t.Fatalf("%s: %v", how, cr.err)
	}
	var names []string
	for _, s := range cr.r.Steps {
		names = append(names, s.Name)
		if !s.OK {
			t.Fatalf("step %s not ok", s.Name)
		}
	}
	if !slices.Equal(names, sixSteps) {
		t.Fatalf("steps %v, want %v", names, sixSteps)
	}
	sr := <-sent
	wantKind(t, sr.err, api.KindSessionNotLive)
	// The child never read again: SIGTERM stays pending on a stopped
	// process, so only SIGKILL ended it.
	px := f.waitFor(id, 0, isType(event.ProviderExited))
	if data(px)["signal"] != "SIGKILL" {
		t.Fatalf("provider.exited %s, want signal SIGKILL", px.Data)
	}
	reason := event.ReasonClosed
	if how == "shutdown" {
		reason = event.ReasonShutdown
	}
	done := f.waitFor(id, 0, isType(event.TurnCompleted))
	if d := data(done); d["status"] != event.StatusInterrupted || d["reason"] != reason {
		t.Fatalf("turn.completed %s, want interrupted/%s", done.Data, reason)
	}
	f.tail(id, event.ProviderExited, event.SessionEnded, event.LeaseReleased)
}

// stepsOK stands for the steps Shutdown does not return.
func stepsOK() []api.StepResult {
	out := make([]api.StepResult, len(sixSteps))
	for i, n := range sixSteps {
		out[i] = api.StepResult{Name: n, OK: true}
	}
	return out
}

// The release clock does not wait behind a send blocked on a provider
// that stopped reading either: a session lock in use is activity, so the
// clock starts again instead of waiting.
func TestReleaseClockDoesNotWaitBehindBlockedSend(t *testing.T) {
	f := newFixture(t)
	f.h.o.RequestTimeout = time.Hour
	ctx := context.Background()
	id := f.create("echo")
	f.hold(id, "h", "c1")
	child := f.lookupChild(t, id)
	pid := child.Identity().PID
	if _, err := f.h.Release(ctx, "c1", api.ReleaseParams{SessionID: id, HolderID: "h"}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: strings.Repeat("x", 900<<10)})
		sent <- err
	}()
	waitPipeFull(t, child)
	fired := make(chan struct{})
	go func() { f.clk.Advance(idle); close(fired) }()
	select {
	case <-fired:
	case <-time.After(stallGuard):
		syscall.Kill(pid, syscall.SIGCONT)
		<-fired
		t.Fatal("the release clock waited behind the send blocked on a stopped provider")
	}
	if si, _ := f.h.Get(ctx, id); si.ReleaseAt == nil || si.State != "live" {
		t.Fatalf("after the clock fired on a busy session: %+v, want live with the clock re-armed", si)
	}
	if _, err := f.h.Close(ctx, id); err != nil { // cancels the send
		t.Fatal(err)
	}
	wantKind(t, <-sent, api.KindSessionNotLive)
}
