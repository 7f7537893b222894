package service

import "testing"

func TestExecQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/usr/bin/sessiond", "/usr/bin/sessiond"},
		{"/home/a b/bin/sessiond", `"/home/a b/bin/sessiond"`},
		{"/opt/100%/sessiond", "/opt/100%%/sessiond"},
		{"/opt/$HOME/sessiond", "/opt/$HOME/sessiond"}, // the executable word is not expanded
		{"/opt/a;b/sessiond", `"/opt/a;b/sessiond"`},
	}
	for _, tc := range tests {
		if got, err := execQuote(tc.in); err != nil || got != tc.want {
			t.Errorf("execQuote(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	// systemd refuses an executable name with a quote or a backslash.
	for _, bad := range []string{"relative/sessiond", "/opt/a\nb", `/opt/a"b/sessiond`, `/opt/a'b/sessiond`, `/opt/a\b/sessiond`} {
		if _, err := execQuote(bad); err == nil {
			t.Errorf("execQuote(%q): no error", bad)
		}
	}
}
