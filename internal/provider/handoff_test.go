package provider

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// TestLineReaderDeadlineKeepsCutLine: a read deadline in the middle of a
// line is not the line's end: Next reports it, Unparsed holds the cut
// bytes, and once reads go on the line comes back whole, once.
func TestLineReaderDeadlineKeepsCutLine(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	lr := NewLineReader(r, 1<<10)
	if _, err := w.Write([]byte("one\ntw")); err != nil {
		t.Fatal(err)
	}
	if line, err := lr.Next(); err != nil || string(line) != "one" {
		t.Fatalf("first line %q, %v", line, err)
	}
	r.SetReadDeadline(time.Unix(1, 0))
	if _, err := lr.Next(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Next at the deadline: %v", err)
	}
	if got := string(lr.Unparsed()); got != "tw" {
		t.Fatalf("unparsed %q, want %q", got, "tw")
	}
	r.SetReadDeadline(time.Time{})
	w.Write([]byte("o\n"))
	w.Close()
	if line, err := lr.Next(); err != nil || string(line) != "two" {
		t.Fatalf("cut line %q, %v; want \"two\"", line, err)
	}
	if _, err := lr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last line: %v", err)
	}
}

// TestPrefixedReadsPrefixFirst: an adopted stdout yields the handed-over
// bytes, then the pipe; Close and SetReadDeadline reach the pipe.
func TestPrefixedReadsPrefixFirst(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := NewPrefixed([]byte(`{"a":`), r)
	w.Write([]byte("1}\n"))
	w.Close()
	lr := NewLineReader(p, 1<<10)
	if line, err := lr.Next(); err != nil || string(line) != `{"a":1}` {
		t.Fatalf("line %q, %v", line, err)
	}
	if err := p.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
