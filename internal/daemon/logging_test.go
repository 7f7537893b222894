package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/tty"
)

func TestNewLogger(t *testing.T) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	var buf strings.Builder
	tests := []struct {
		name, level, format string
		w                   any
		json, wantErr       bool
	}{
		{"auto on /dev/null is JSON (a char device, not a terminal)", "info", "auto", devnull, true, false},
		{"auto on a buffer is JSON", "debug", "auto", &buf, true, false},
		{"text forced", "warn", "text", &buf, false, false},
		{"bad level", "loud", "auto", &buf, false, true},
		{"bad format", "info", "xml", &buf, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := tc.w.(interface{ Write([]byte) (int, error) })
			l, err := newLogger(w, tc.level, tc.format)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, isJSON := l.Handler().(*slog.JSONHandler)
			if isJSON != tc.json {
				t.Fatalf("JSON handler = %v, want %v", isJSON, tc.json)
			}
		})
	}
	if tty.IsTerminal(devnull) {
		t.Fatal("/dev/null taken for a terminal")
	}
}

// TestLoggerUnderJournal: with --log-format auto and JOURNAL_STREAM naming
// the stream we write to, lines are plain text: no colour, no time, not
// JSON. A JOURNAL_STREAM naming another file changes nothing.
func TestLoggerUnderJournal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
	l, err := newLogger(f, "info", "auto")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("listening", "socket", "/run/s.sock")
	b, _ := os.ReadFile(f.Name())
	line := string(b)
	if strings.Contains(line, "\x1b[") || strings.HasPrefix(line, "{") || !strings.HasPrefix(line, "INF listening") ||
		!strings.Contains(line, "socket=/run/s.sock") {
		t.Fatalf("journal line %q: want plain text without colour or time", line)
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino+1))
	l, _ = newLogger(f, "info", "auto")
	if _, isJSON := l.Handler().(*slog.JSONHandler); !isJSON {
		t.Fatal("JOURNAL_STREAM of another file: want JSON")
	}
}
