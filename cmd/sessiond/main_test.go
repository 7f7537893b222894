package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/exitcode"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestVersionAndUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"version"}, exitcode.OK, "sessiond "},
		{nil, exitcode.Usage, "usage:"},
		{[]string{"bogus"}, exitcode.Usage, "unknown command"},
		{[]string{"provider"}, exitcode.Usage, "provider echo"},
		{[]string{"serve", "--log-format", "xml"}, exitcode.Usage, "--log-format"},
		{[]string{"ctl"}, exitcode.Usage, "usage: sessiond ctl"},
		{[]string{"ctl", "help"}, exitcode.OK, "attach ID"},
	}
	for _, tc := range tests {
		var o, e strings.Builder
		code := run(tc.args, strings.NewReader(""), &o, &e)
		if code != tc.code || !strings.Contains(o.String()+e.String(), tc.out) {
			t.Errorf("%v: exit %d (want %d), output %q (want %q)", tc.args, code, tc.code, o.String()+e.String(), tc.out)
		}
	}
}
