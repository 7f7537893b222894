package provider

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestLineReader(t *testing.T) {
	const max = 1024
	long := strings.Repeat("z", 4<<20)
	tests := []struct {
		name  string
		input string
		want  []string // "!" marks ErrLineTooLong
	}{
		{name: "plain", input: "a\nbb\n", want: []string{"a", "bb"}},
		{name: "final line without newline", input: "a\nlast", want: []string{"a", "last"}},
		{name: "exactly max", input: strings.Repeat("m", max) + "\nok\n", want: []string{strings.Repeat("m", max), "ok"}},
		{name: "one over max", input: strings.Repeat("m", max+1) + "\nok\n", want: []string{"!", "ok"}},
		{name: "huge line skipped", input: "a\n" + long + "\nok\n", want: []string{"a", "!", "ok"}},
		{name: "huge final line", input: "a\n" + long, want: []string{"a", "!"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lr := NewLineReader(strings.NewReader(tc.input), max)
			var got []string
			for {
				line, err := lr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if errors.Is(err, ErrLineTooLong) {
					got = append(got, "!")
				} else if err != nil {
					t.Fatal(err)
				} else {
					got = append(got, string(line))
				}
				if cap(lr.buf) > 4*max {
					t.Fatalf("buffered %d bytes for a %d-byte cap", cap(lr.buf), max)
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("lines %q, want %q", got, tc.want)
			}
		})
	}
}
