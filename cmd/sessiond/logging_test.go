package main

import (
	"log/slog"
	"os"
	"strings"
	"testing"
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
	if isTerminal(devnull) {
		t.Fatal("/dev/null taken for a terminal")
	}
}
