package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lmittmann/tint"
	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/tty"
)

// newLogger builds the daemon's logger: tint (coloured text) on a
// terminal, plain text without colours or times when w is the systemd
// journal's stream (JOURNAL_STREAM; the journal stamps each line itself),
// JSON otherwise, unless format says otherwise.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	switch format {
	case "auto":
		if underJournal(w, os.Getenv("JOURNAL_STREAM")) {
			return slog.New(tint.NewTextHandler(w, &tint.Options{
				Level: lvl, NoColor: true, ReplaceAttr: dropTime,
			})), nil
		}
		if tty.IsTerminal(w) {
			format = "text"
		} else {
			format = "json"
		}
	case "text", "json":
	default:
		return nil, fmt.Errorf("--log-format %q: want auto, text or json", format)
	}
	if format == "text" {
		_, noColor := os.LookupEnv("NO_COLOR")
		return slog.New(tint.NewTextHandler(w, &tint.Options{
			Level: lvl, TimeFormat: time.TimeOnly, NoColor: noColor || !tty.IsTerminal(w),
		})), nil
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}

// underJournal reports whether w is the stream systemd connected to the
// journal: JOURNAL_STREAM is "<device>:<inode>" of that stream, and a
// child that inherited the variable but writes elsewhere must not match.
func underJournal(w io.Writer, stream string) bool {
	f, ok := w.(*os.File)
	if stream == "" || !ok {
		return false
	}
	dev, ino, ok := strings.Cut(stream, ":")
	if !ok {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return dev == strconv.FormatUint(uint64(st.Dev), 10) && ino == strconv.FormatUint(st.Ino, 10)
}

// dropTime removes the record's time (the journal has its own).
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}
