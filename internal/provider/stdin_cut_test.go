package provider

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestStdinCutLineEnded: a write that timed out partway (a provider that
// stopped reading with the pipe full) leaves a cut line in the pipe; the
// next write, another session's on a shared runtime, ends that line
// first, so the provider reads one bad line and then the next request
// whole, not the two merged into one unparseable line.
func TestStdinCutLineEnded(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := NewStdin(w, time.Hour)
	big := strings.Repeat("x", 1<<20) + "\n" // more than any pipe buffer
	if err := s.WriteLineWithin([]byte(big), 100*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a write to a pipe nobody reads: %v, want ErrTimeout", err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if err := s.WriteLine([]byte(`{"id":2}` + "\n")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var got []string
	for l := range lines {
		got = append(got, l)
	}
	if len(got) != 2 || strings.Trim(got[0], "x") != "" || got[1] != `{"id":2}` {
		last := ""
		if len(got) > 0 {
			last = got[len(got)-1]
			last = last[max(0, len(last)-20):]
		}
		t.Fatalf("the provider read %d lines, the last ending %q; want the cut line, then {\"id\":2} whole", len(got), last)
	}
}
