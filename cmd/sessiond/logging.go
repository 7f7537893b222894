package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
	"golang.org/x/sys/unix"
)

// newLogger builds the daemon's logger: tint (coloured text) on a
// terminal, JSON otherwise, unless format says otherwise.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	switch format {
	case "auto":
		if isTerminal(w) {
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
			Level: lvl, TimeFormat: time.TimeOnly, NoColor: noColor || !isTerminal(w),
		})), nil
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}

// isTerminal asks the kernel (a TCGETS ioctl); a character device such as
// /dev/null is not a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
