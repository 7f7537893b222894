package codex

import (
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/event"
)

func TestOrphanDirective(t *testing.T) {
	a, p, rec := newEchoAdapter(t, t.TempDir(), "")
	ctx := testCtx(t)
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.StartTurn(ctx, "t_1", "leave one behind /orphan"); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, event.TurnCompleted, "t_1")
	root := p.cmd.Process.Pid
	pids := slices.DeleteFunc(taggedPids(p.tag), func(pid int) bool { return pid == root })
	if len(pids) != 1 {
		t.Fatalf("tagged descendants %v, want one orphan", pids)
	}
	orphan := pids[0]
	t.Cleanup(func() { _ = syscall.Kill(orphan, syscall.SIGKILL) })
	if sid, err := unix.Getsid(orphan); err != nil || sid != orphan {
		t.Fatalf("orphan sid %d (%v), want its own session", sid, err)
	}
	// The orphan was exec'd but may still be starting: poll its signal
	// mask (there is no other signal to wait on).
	for deadline := time.Now().Add(waitLong); !sigtermIgnored(t, orphan); {
		if time.Now().After(deadline) {
			t.Fatal("orphan does not ignore SIGTERM")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, fd := range []string{"0", "1", "2"} {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", orphan, fd)); err != nil || target != os.DevNull {
			t.Fatalf("orphan fd %s -> %q (%v), want /dev/null", fd, target, err)
		}
	}
	// The provider's stdout ends with the provider: the orphan does not hold it.
	_ = p.in.Close()
	<-a.Done()
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("echo exit code %d", code)
	}
	if err := syscall.Kill(orphan, 0); err != nil {
		t.Fatalf("orphan died with its parent: %v", err)
	}
	_ = syscall.Kill(orphan, syscall.SIGKILL)
	// Reaped by init, not by us: poll until it is gone from /proc.
	deadline := time.Now().Add(waitLong)
	for slices.Contains(taggedPids(p.tag), orphan) {
		if time.Now().After(deadline) {
			t.Fatal("orphan still present after SIGKILL")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
