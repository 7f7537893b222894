package provider

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// TestErrorKinds: the typed errors match their kind with errors.Is (and
// only theirs), through the wrapping adapters add.
func TestErrorKinds(t *testing.T) {
	kinds := []error{ErrExited, ErrRequestNotFound, ErrTurnRunning, ErrNotStarted, ErrTimeout, ErrStopping,
		ErrThreadNotFound, ErrDecisionNotAllowed, ErrLineTooLong, ErrNoHandover, ErrRequestInFlight}
	for _, tc := range []struct {
		name string
		err  error
		kind error
	}{
		{"not found", &NotFoundError{ThreadID: "th1", Cause: "No conversation found with session ID: th1"}, ErrThreadNotFound},
		{"decision", &DecisionError{Decision: "maybe", Allowed: []string{"approve"}}, ErrDecisionNotAllowed},
		{"write cancelled", write(t, nil, true), ErrStopping},
		{"write not read", write(t, os.ErrDeadlineExceeded, false), ErrTimeout},
		{"write failed", write(t, io.ErrClosedPipe, false), ErrExited},
	} {
		for _, k := range kinds {
			if got := errors.Is(tc.err, k); got != (k == tc.kind) {
				t.Errorf("%s: errors.Is(%v, %v) = %v", tc.name, tc.err, k, got)
			}
		}
	}
	var nf *NotFoundError
	if err := error(&NotFoundError{ThreadID: "th1", Cause: "gone"}); !errors.As(err, &nf) || nf.Cause != "gone" {
		t.Errorf("NotFoundError keeps the provider's wording: %v", err)
	}
}

// write is what a Stdin's write returns when the child's stdin fails
// with err, or after Cancel.
func write(t *testing.T, err error, cancel bool) error {
	t.Helper()
	s := NewStdin(failWriter{err}, time.Second)
	if cancel {
		s.Cancel()
	}
	werr := s.WriteLine([]byte("{}\n"))
	if werr == nil {
		t.Fatal("write succeeded")
	}
	return werr
}

type failWriter struct{ err error }

func (w failWriter) Write(b []byte) (int, error) {
	if w.err == nil {
		return len(b), nil
	}
	return 0, w.err
}
