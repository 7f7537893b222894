package provider

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// The stdio plumbing every protocol shares: a bounded line reader, a
// reader that knows when bytes last arrived (for the drain's quiet rule),
// and a stdin whose writes are bounded and cancellable.

// ErrLineTooLong: a line exceeded the maximum; its rest was skipped.
var ErrLineTooLong = errors.New("line too long")

// LineReader returns newline-terminated lines of at most max bytes. A
// longer line is skipped up to its newline without buffering it whole.
type LineReader struct {
	br      *bufio.Reader
	max     int
	buf     []byte
	partial bool // buf holds the start of a line a paused read cut (Unparsed)
}

// NewLineReader reads lines of at most max bytes from r.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{br: bufio.NewReaderSize(r, min(64<<10, max+1)), max: max}
}

// Next returns the next line without its newline. ErrLineTooLong reports
// a skipped line (the reader stays usable); other errors end the stream.
// A final line without a newline is returned before io.EOF. A read
// deadline (os.ErrDeadlineExceeded: a pause for a live upgrade) is not the
// end of a line: the bytes read so far are kept (Unparsed) and the next
// call goes on with them.
func (lr *LineReader) Next() ([]byte, error) {
	if !lr.partial {
		lr.buf = lr.buf[:0]
	}
	lr.partial = false
	tooLong := false
	for {
		chunk, err := lr.br.ReadSlice('\n')
		if !tooLong {
			if len(lr.buf)+len(chunk) > lr.max+1 { // +1: the newline
				tooLong = true
				lr.buf = lr.buf[:0]
			} else {
				lr.buf = append(lr.buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, os.ErrDeadlineExceeded) && !tooLong:
			lr.partial = true
			return nil, err
		case err != nil && (tooLong || len(lr.buf) == 0):
			if tooLong && errors.Is(err, io.EOF) {
				return nil, ErrLineTooLong
			}
			return nil, err
		case err != nil:
			return lr.buf, nil // final unterminated line; EOF comes next call
		case tooLong:
			return nil, ErrLineTooLong
		}
		return lr.buf[:len(lr.buf)-1], nil
	}
}

// Unparsed is what was read but not yet returned as a line: the start of
// a line a paused read cut, then whatever the buffer holds.
func (lr *LineReader) Unparsed() []byte {
	var out []byte
	if lr.partial {
		out = append(out, lr.buf...)
	}
	if n := lr.br.Buffered(); n > 0 {
		b, _ := lr.br.Peek(n)
		out = append(out, b...)
	}
	return out
}

// ActivityReader records when bytes last arrived and whether the reader
// is blocked waiting for more, for Drain's quiet rule.
type ActivityReader struct {
	r       io.Reader
	last    atomic.Int64 // unix nanos of the last read that returned bytes
	waiting atomic.Bool  // inside r.Read
}

// NewActivityReader wraps r.
func NewActivityReader(r io.Reader) *ActivityReader {
	ar := &ActivityReader{r: r}
	ar.last.Store(time.Now().UnixNano())
	return ar
}

func (ar *ActivityReader) Read(p []byte) (int, error) {
	ar.waiting.Store(true)
	n, err := ar.r.Read(p)
	ar.waiting.Store(false)
	if n > 0 {
		ar.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// WaitQuiet waits until done is closed (the reader saw the end), or the
// reader has been idle in Read for `quiet` (measured from the later of
// the last byte and the call: a surviving descendant may hold the pipe
// open), or ctx ends (an error).
func (ar *ActivityReader) WaitQuiet(ctx context.Context, done <-chan struct{}, quiet time.Duration) error {
	start := time.Now()
	t := time.NewTimer(quiet)
	defer t.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("provider: drain: %w", context.Cause(ctx))
		case <-t.C:
			last := time.Unix(0, ar.last.Load())
			if start.After(last) {
				last = start
			}
			idle := time.Since(last)
			if ar.waiting.Load() && idle >= quiet {
				return nil
			}
			t.Reset(max(quiet-idle, quiet/10))
		}
	}
}

// Stdin is a child's stdin: one line per write, serialized, each bounded
// by a timeout (a provider that stops reading must not block its caller,
// who may hold the session lock the close ladder needs), and cancellable.
// The timeout covers the wait for the stdin as well as the write: on a
// shared runtime's stdin the writers of many sessions queue behind one
// blocked write, and none of them waits longer than its own timeout.
type Stdin struct {
	in        io.Writer
	timeout   time.Duration
	slot      chan struct{} // holds a token while a write runs: serializes writes
	cut       bool          // a failed write left part of its line in the pipe (guarded by slot)
	stop      chan struct{} // closed by Cancel
	cancelled atomic.Bool
}

// NewStdin wraps in; each write waits at most timeout for the child.
func NewStdin(in io.Writer, timeout time.Duration) *Stdin {
	return &Stdin{in: in, timeout: timeout, slot: make(chan struct{}, 1), stop: make(chan struct{})}
}

// WriteLine writes b (a line, its newline included). A cancelled stdin is
// ErrStopping; a child that does not read within the timeout ErrTimeout;
// any other failure wraps ErrExited.
func (s *Stdin) WriteLine(b []byte) error { return s.WriteLineWithin(b, s.timeout) }

// Timeout is the longest a write waits.
func (s *Stdin) Timeout() time.Duration { return s.timeout }

// WriteLineWithin is WriteLine bounded by the shorter of within and the
// stdin's timeout (a request whose caller has less time than that).
func (s *Stdin) WriteLineWithin(b []byte, within time.Duration) error {
	return s.WriteLineAbort(b, within, nil)
}

// WriteLineAbort is WriteLineWithin that also gives up, with ErrStopping,
// when abort is closed while it waits for the stdin behind another write
// (one session's view of a shared stdin being cancelled).
func (s *Stdin) WriteLineAbort(b []byte, within time.Duration, abort <-chan struct{}) error {
	timeout := min(within, s.timeout)
	deadline := time.Now().Add(timeout)
	wait, stopWait := Timer(timeout)
	select {
	case s.slot <- struct{}{}:
		stopWait()
	case <-s.stop:
		stopWait()
		return fmt.Errorf("provider: write stdin: %w", ErrStopping)
	case <-abort:
		stopWait()
		return fmt.Errorf("provider: write stdin: %w", ErrStopping)
	case <-wait:
		return fmt.Errorf("provider: write stdin: behind another write for %s: %w", timeout, ErrTimeout)
	}
	defer func() { <-s.slot }()
	if d, ok := s.in.(writeDeadliner); ok {
		if d.SetWriteDeadline(deadline) == nil {
			defer d.SetWriteDeadline(time.Time{})
		}
	}
	// Checked after the deadline is set: a Cancel racing this write either
	// is seen here or sets its past deadline after ours.
	if s.cancelled.Load() {
		return fmt.Errorf("provider: write stdin: %w", ErrStopping)
	}
	if s.cut {
		// End the line an earlier write left cut: the provider reads one
		// bad line, then this one whole (on a shared runtime it is often
		// another session's request).
		b = append([]byte{'\n'}, b...)
	}
	n, err := s.in.Write(b)
	if n > 0 {
		s.cut = err != nil
	}
	if err != nil {
		switch {
		case s.cancelled.Load():
			return fmt.Errorf("provider: write stdin: %w", ErrStopping)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("provider: write stdin: not read for %s: %w", timeout, ErrTimeout)
		}
		return fmt.Errorf("provider: write stdin: %w: %w", ErrExited, err)
	}
	return nil
}

// Cancel makes the write in progress and every later one return
// ErrStopping at once. It reports whether this call cancelled it.
func (s *Stdin) Cancel() bool {
	if s.cancelled.Swap(true) {
		return false
	}
	close(s.stop)
	if d, ok := s.in.(writeDeadliner); ok {
		_ = d.SetWriteDeadline(time.Unix(1, 0)) // in the past: a pending write fails now
	}
	return true
}

// writeDeadliner is a stdin that can bound a write (an *os.File pipe).
type writeDeadliner interface {
	SetWriteDeadline(t time.Time) error
}
