package provider

import (
	"errors"
	"testing"
	"time"
)

// blockedWriter is a stdin whose reader stopped: a write says it began
// and then blocks until released.
type blockedWriter struct {
	entered chan struct{}
	release chan struct{}
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	w.entered <- struct{}{}
	<-w.release
	return len(p), nil
}

// TestStdinQueueBounded: the writes queued behind one blocked write (the
// sessions of a shared runtime that stopped reading) each give up within
// their own timeout, and a cancelled writer's wait ends at its abort:
// none waits for the blocked write to end.
func TestStdinQueueBounded(t *testing.T) {
	w := &blockedWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	s := NewStdin(w, time.Hour)
	first := make(chan error, 1)
	go func() { first <- s.WriteLine([]byte("first\n")) }()
	<-w.entered
	queued := make(chan error, 1)
	go func() { queued <- s.WriteLineWithin([]byte("second\n"), 100*time.Millisecond) }()
	abort := make(chan struct{})
	aborted := make(chan error, 1)
	go func() { aborted <- s.WriteLineAbort([]byte("third\n"), time.Hour, abort) }()
	close(abort)
	for name, c := range map[string]chan error{"a write with a short timeout": queued, "an aborted write": aborted} {
		select {
		case err := <-c:
			want := ErrTimeout
			if c == aborted {
				want = ErrStopping
			}
			if !errors.Is(err, want) {
				t.Fatalf("%s behind a blocked one: %v, want %v", name, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s waited behind a blocked write", name)
		}
	}
	select {
	case err := <-first:
		t.Fatalf("the blocked write returned %v", err)
	default:
	}
	close(w.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := s.WriteLineWithin([]byte("after\n"), 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
