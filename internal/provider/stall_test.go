package provider

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// A provider that stops reading its stdin cannot block a write forever:
// the write gives up after the request timeout with ErrTimeout.
func TestWriteToStalledProviderIsBounded(t *testing.T) {
	inR, inW, err := os.Pipe() // a real pipe: the daemon's children get one
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	outR, outW := io.Pipe()
	a := NewAdapter(Options{In: inW, Out: outR, RequestTimeout: 100 * time.Millisecond, Emit: func(event.Draft) {}})
	defer func() { outW.Close(); <-a.Done(); inW.Close() }()
	big := strings.Repeat("x", 1<<20) // far beyond the pipe's buffer; nobody reads
	done := make(chan error, 1)
	go func() { done <- a.write(outNotification{Method: "turn/start", Params: big}) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("write to a stalled provider: %v, want ErrTimeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("write to a stalled provider blocked")
	}
}
