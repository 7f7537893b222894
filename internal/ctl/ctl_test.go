package ctl

import (
	"flag"
	"strings"
	"testing"
)

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		args   []string
		pos    string
		holder string
	}{
		{[]string{"ID", "--holder", "h1"}, "ID", "h1"},
		{[]string{"--holder", "h2", "ID"}, "ID", "h2"},
		{[]string{"ID"}, "ID", ""},
	}
	for _, tc := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		holder := fs.String("holder", "", "")
		pos, err := parseInterspersed(fs, tc.args)
		if err != nil || strings.Join(pos, " ") != tc.pos || *holder != tc.holder {
			t.Fatalf("%v: pos %v holder %q err %v", tc.args, pos, *holder, err)
		}
	}
}
