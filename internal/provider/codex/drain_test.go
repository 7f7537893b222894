package codex

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestDrainAtEOFEmitsEverything(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	for _, d := range []string{"a", "b", "c"} {
		f.send(t, map[string]any{"method": "item/agentMessage/delta", "params": map[string]any{"turnId": "pt", "delta": d}})
	}
	_ = f.outW.Close()
	if err := f.a.Drain(testCtx(t), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := turnText(f.rec.all(), "t_1"); got != "abc" {
		t.Fatalf("deltas after drain %q", got)
	}
	select {
	case <-f.a.Done():
	default:
		t.Fatal("Done open after Drain returned at EOF")
	}
}

// noCloser hides Close so Drain cannot stop the reader by closing Out.
type noCloser struct{ io.Reader }

func TestDrainStopsAfterQuiet(t *testing.T) {
	tests := []struct {
		name   string
		closer bool
	}{
		{name: "closable stdout", closer: true},
		{name: "stdout without Close"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(o *Options) {
				if !tc.closer {
					o.Out = noCloser{o.Out}
				}
			})
			f.handshake(t)
			f.startTurn(t, "t_1", "pt")
			f.send(t, map[string]any{"method": "item/agentMessage/delta", "params": map[string]any{"turnId": "pt", "delta": "before"}})
			// The stdout stays open (a descendant holds it): Drain must
			// return after the quiet period, not wait for EOF.
			if err := f.a.Drain(testCtx(t), 20*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if got := turnText(f.rec.all(), "t_1"); got != "before" {
				t.Fatalf("deltas %q", got)
			}
			if tc.closer {
				select { // Out closed: the reader ends
				case <-f.a.Done():
				case <-time.After(waitLong):
					t.Fatal("reader still running after Drain closed Out")
				}
				return
			}
			// The reader still reads, but nothing reaches Emit any more.
			f.send(t, map[string]any{"method": "item/agentMessage/delta", "params": map[string]any{"turnId": "pt", "delta": "after"}})
			f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"turn": map[string]any{"id": "pt", "status": "completed"}}})
			_ = f.outW.Close()
			<-f.a.Done()
			if evs := f.rec.all(); len(evs) != 1 {
				t.Fatalf("events after Drain: %s", typesOf(evs))
			}
		})
	}
}

func TestDrainBoundedByCtx(t *testing.T) {
	f := newFake(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.a.Drain(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("drain: %v", err)
	}
	<-f.a.Done()
}

func TestReaderEmitsWrittenRowsBeforeDone(t *testing.T) {
	// What a provider writes while exiting is emitted before Done closes.
	var buf bytes.Buffer
	buf.WriteString(`{"id":1,"result":{}}` + "\n")
	for range 100 {
		buf.WriteString(`{"method":"item/agentMessage/delta","params":{"delta":"x"}}` + "\n")
	}
	rec := newRecorder()
	pr, pw := io.Pipe()
	a := NewAdapter(Options{In: nopWriteCloser{io.Discard}, Out: pr, Emit: rec.emit})
	a.mu.Lock()
	a.threadID, a.turn = "thr_1", &openTurn{ours: "t_1"}
	a.mu.Unlock()
	go func() { _, _ = pw.Write(buf.Bytes()); _ = pw.Close() }()
	<-a.Done()
	if got := turnText(rec.all(), "t_1"); got != strings.Repeat("x", 100) {
		t.Fatalf("emitted %d deltas before Done", len(got))
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// closeRecorder is an Out that records its Close.
type closeRecorder struct {
	io.Reader
	closed chan struct{}
}

func (c *closeRecorder) Close() error { close(c.closed); return nil }

// Drain closes Out also when the provider's stdout already ended before it
// was called: the descriptor never waits for the garbage collector.
func TestDrainAfterEOFClosesOut(t *testing.T) {
	out := &closeRecorder{Reader: strings.NewReader(""), closed: make(chan struct{})}
	a := NewAdapter(Options{In: nopWriteCloser{io.Discard}, Out: out})
	<-a.Done() // EOF seen before Drain starts
	if err := a.Drain(testCtx(t), time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case <-out.closed:
	default:
		t.Fatal("Out left open after Drain at EOF")
	}
}
