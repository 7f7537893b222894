package codex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

func TestCrashMidTurn(t *testing.T) {
	a, p, rec := newEchoAdapter(t, t.TempDir(), "")
	ctx := testCtx(t)
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.StartTurn(ctx, "t_1", "boom /crash"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(waitLong):
		t.Fatal("Done not closed after the provider crashed")
	}
	if code := p.exitCode(t); code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
	evs := rec.all()
	if got := typesOf(evs); got != event.MessageDelta {
		t.Fatalf("events %s, want the one delta written before the crash", got)
	}
	if got := turnText(evs, "t_1"); got == "" || !strings.HasPrefix("echo: boom /crash", got) {
		t.Fatalf("delta %q", got)
	}
	if !a.Busy() {
		t.Fatal("the open turn is the host's to complete; adapter must still report it")
	}
	if err := a.StartTurn(ctx, "t_2", "x"); !errors.Is(err, ErrTurnRunning) {
		t.Fatalf("turn after crash: %v", err)
	}
	if _, err := a.Interrupt(ctx); !errors.Is(err, ErrExited) {
		t.Fatalf("interrupt after crash: %v, want ErrExited", err)
	}
	if err := a.Drain(ctx, time.Millisecond); err != nil {
		t.Fatalf("drain after EOF: %v", err)
	}
}

func TestStartFailsWhenProviderExits(t *testing.T) {
	a, p, _ := newEchoAdapter(t, t.TempDir(), "", "--exit-at-start")
	_, err := a.Start(testCtx(t))
	if !errors.Is(err, ErrExited) {
		t.Fatalf("start: %v, want ErrExited", err)
	}
	if code := p.exitCode(t); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !strings.Contains(p.stderr.String(), "exit-at-start") {
		t.Fatalf("stderr %q", p.stderr.String())
	}
}

func TestStartBounds(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // RequestTimeout
		ctx     time.Duration // ctx deadline (0: none)
		want    error
	}{
		{name: "request timeout", timeout: 100 * time.Millisecond, want: ErrTimeout},
		{name: "ctx deadline", timeout: waitLong, ctx: 100 * time.Millisecond, want: context.DeadlineExceeded},
		// The start's deadline (start_timeout) bounds the handshake, not
		// the request timeout: it waits past the latter.
		{name: "ctx deadline past the request timeout", timeout: 50 * time.Millisecond, ctx: 300 * time.Millisecond, want: context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := startEcho(t, t.TempDir(), "--slow-start", "600000")
			a := NewAdapter(Options{In: p.in, Out: p.out, RequestTimeout: tc.timeout})
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctx > 0 {
				ctx, cancel = context.WithTimeout(context.Background(), tc.ctx)
			}
			defer cancel()
			if _, err := a.Start(ctx); !errors.Is(err, tc.want) {
				t.Fatalf("start: %v, want %v", err, tc.want)
			}
			p.kill()
			<-a.Done()
		})
	}
}

func TestFloodTurn(t *testing.T) {
	a, _, rec := newEchoAdapter(t, t.TempDir(), "")
	ctx := testCtx(t)
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.StartTurn(ctx, "t_1", "/flood 2000 50"); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, event.TurnCompleted, "t_1")
	if got := turnText(rec.all(), "t_1"); got != strings.Repeat("x", 2000*50) {
		t.Fatalf("flood text %d bytes", len(got))
	}
}

func TestEchoExitsOnEOFMidTurn(t *testing.T) {
	a, p, rec := newEchoAdapter(t, t.TempDir(), "")
	ctx := testCtx(t)
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.StartTurn(ctx, "t_1", "/sleep 600000"); err != nil {
		t.Fatal(err)
	}
	_ = p.in.Close()
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	<-a.Done()
	if evs := rec.all(); len(evs) != 0 {
		t.Fatalf("events %s, want none", typesOf(evs))
	}
}

func TestEchoSignalFlags(t *testing.T) {
	tests := []struct {
		name                     string
		args                     []string
		survivesEOF, ignoresTerm bool
	}{
		{name: "default"},
		{name: "ignore-eof", args: []string{"--ignore-eof"}, survivesEOF: true},
		{name: "ignore-eof and sigterm", args: []string{"--ignore-eof", "--ignore-sigterm"}, survivesEOF: true, ignoresTerm: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := startEcho(t, t.TempDir(), tc.args...)
			a := NewAdapter(Options{In: p.in, Out: p.out})
			if _, err := a.Start(testCtx(t)); err != nil { // flags parsed, handlers set
				t.Fatal(err)
			}
			if got := sigtermIgnored(t, p.cmd.Process.Pid); got != tc.ignoresTerm {
				t.Fatalf("SIGTERM ignored = %v, want %v", got, tc.ignoresTerm)
			}
			_ = p.in.Close()
			if !tc.survivesEOF {
				if code := p.exitCode(t); code != 0 {
					t.Fatalf("exit code %d", code)
				}
				<-a.Done()
				return
			}
			// No signal exists for "saw EOF and stayed": poll its log line.
			deadline := time.Now().Add(waitLong)
			for !strings.Contains(p.stderr.String(), "staying up") {
				if time.Now().After(deadline) {
					t.Fatalf("no EOF log line; stderr %q", p.stderr.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			select {
			case <-p.exited:
				t.Fatal("exited on stdin EOF despite --ignore-eof")
			default:
			}
			if !tc.ignoresTerm {
				_ = p.cmd.Process.Signal(syscall.SIGTERM)
				<-p.exited
				if ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGTERM {
					t.Fatalf("wait status %v, want killed by SIGTERM", ws)
				}
			}
			p.kill()
			<-a.Done()
		})
	}
}

// sigtermIgnored reads the SigIgn mask of /proc/<pid>/status.
func sigtermIgnored(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return mask&(1<<(uint(syscall.SIGTERM)-1)) != 0
		}
	}
	t.Fatal("no SigIgn line")
	return false
}
