package claude

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// A CLI that stopped reading its stdin mid-turn: cancel's interrupt
// cannot even be written. The turn still ends interrupted (user_cancel)
// within the interrupt timeout, not the (much longer) request timeout,
// and the host is told to stop the child.
func TestInterruptOfStalledCLI(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	outR, outW := io.Pipe()
	evs := make(chan event.Draft, 64)
	stuck := make(chan struct{}, 1)
	a := NewAdapter(provider.Options{In: inW, Out: outR, Emit: func(d event.Draft) { evs <- d },
		Logger: slog.New(slog.DiscardHandler), RequestTimeout: time.Hour, InterruptTimeout: 200 * time.Millisecond,
		Stuck: func() { stuck <- struct{}{} }})
	defer func() {
		_ = outW.Close()
		<-a.Done()
		_ = inW.Close()
	}()
	send := func(s string) {
		if _, err := outW.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	started := make(chan error, 1)
	go func() { _, err := a.Start(t.Context()); started <- err }()
	// The initialize request is read; after it, nobody reads the CLI's
	// stdin.
	if _, err := bufio.NewReader(inR).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	send(`{"type":"control_response","response":{"subtype":"success","request_id":"sessiond_1","response":{}}}`)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if err := a.StartTurn(t.Context(), "t_1", "hi"); err != nil {
		t.Fatal(err)
	}
	fillPipe(t, inW)
	done := make(chan error, 1)
	go func() { _, err := a.Interrupt(t.Context()); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("interrupt: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("interrupt of a CLI that reads nothing waits for the request timeout")
	}
	for d := range evs {
		if d.Type == event.TurnCompleted {
			if tc := decodeData[event.TurnCompletedData](t, d); tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonUserCancel {
				t.Fatalf("turn.completed %+v", tc)
			}
			break
		}
	}
	<-stuck
}

// fillPipe writes to w until the pipe's buffer is full.
func fillPipe(t *testing.T, w *os.File) {
	t.Helper()
	chunk := make([]byte, 4096)
	for {
		if err := w.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(chunk); errors.Is(err, os.ErrDeadlineExceeded) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
}
