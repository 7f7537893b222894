package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// TestHostileErrors: no error echoes more than a short prefix of a key
// or value, however long (each used to land whole in one log line), and a
// type error names the key, the type it wants and the range.
func TestHostileErrors(t *testing.T) {
	noCodex(t)
	mb := strings.Repeat("x", 1<<20)
	tests := []struct {
		name, text string
		want       error
		has        []string
	}{
		{"unquoted value", "step_timeout=" + mb + "\n", ErrBadValue, []string{"step_timeout wants a duration string from 100ms to 1h"}},
		{"unquoted ladder value", "[ladder]\ngrace=" + mb + "\n", ErrBadValue, []string{"ladder.grace wants a duration string from 0 to 10m"}},
		{"unknown key", mb + " = 1\n", ErrUnknownKey, []string{"xxxx…"}},
		{"digits", "max_message_bytes = " + strings.Repeat("9", 1<<20) + "\n", ErrBadValue, []string{"out of range", "max_message_bytes wants an integer from 4096 to 67108864"}},
		{"protocol", "[providers.echo]\nprotocol = \"" + mb + "\"\n", ErrBadValue, []string{"providers.echo.protocol", "codex-app-server"}},
		{"long provider name", "[providers." + mb + "]\nprotocol = \"x\"\n", ErrBadValue, []string{"providers.xxx"}},
		{"words", "step_timeout = \"" + strings.Repeat("a ", 1<<19) + "\"\n", ErrBadValue, []string{"step_timeout"}},
		{"utf-8 value", "step_timeout = \"" + strings.Repeat("é", 1000) + "\"\n", ErrBadValue, []string{"step_timeout"}},
		{"int for a duration", "step_timeout = 3600\n", ErrBadValue,
			[]string{"step_timeout = 3600 (a TOML integer): want a duration string from 100ms to 1h"}},
		{"string for a size", "max_message_bytes = \"1MiB\"\n", ErrBadValue,
			[]string{`max_message_bytes = "1MiB" (a TOML string): want an integer from 4096 to 67108864`}},
		{"ladder int", "[ladder]\ngrace = 5\n", ErrBadValue, []string{"ladder.grace = 5", "from 0 to 10m"}},
		{"command string", "[providers.x]\ncommand = \"x\"\n", ErrBadValue, []string{"providers.x.command", "an array of strings"}},
		{"limits.pids string", "[limits]\npids = \"5\"\n", ErrBadValue, []string{"limits.pids", "from 16 to 4194304"}},
		{"float", "max_connections = 1.5\n", ErrBadValue, []string{"max_connections = 1.5 (a TOML float): want an integer from 1 to 1048576"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			err := Parse(tc.text, &c)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %.300v, want %v", err, tc.want)
			}
			msg := err.Error()
			if len(msg) > 600 || !utf8.ValidString(msg) {
				t.Fatalf("error of %d bytes (valid UTF-8: %v): %.700q", len(msg), utf8.ValidString(msg), msg)
			}
			for _, h := range tc.has {
				if !strings.Contains(msg, h) {
					t.Fatalf("error %q does not name %q", msg, h)
				}
			}
		})
	}
}

// TestPrefixKeepsCharacters: a cut never splits a UTF-8 character.
func TestPrefixKeepsCharacters(t *testing.T) {
	for n := range 8 {
		s := strings.Repeat("a", n) + strings.Repeat("€", 40)
		if p := prefix(s); !utf8.ValidString(p) || len(p) > maxEcho+len("…") {
			t.Fatalf("prefix of %d+€…: %q", n, p)
		}
	}
}

// TestLoadRefusesNonRegular: /dev/zero (read forever), a FIFO (blocks
// forever on open or read), a directory are refused at once, and a file
// past 1 MiB is refused naming the cap, each naming the path.
func TestLoadRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxFileBytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want error
		has  string
	}{
		{"/dev/zero", ErrNotRegular, "a device"},
		{fifo, ErrNotRegular, "a FIFO"},
		{dir, ErrNotRegular, "a directory"},
		{big, ErrTooLarge, "1048576 bytes"},
	}
	for _, tc := range tests {
		_, err := Load(tc.path, true)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.has) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("Load(%s): %v, want %v naming %q and the path", tc.path, err, tc.want, tc.has)
		}
	}
}

// TestProviderFieldsCheckedAtLoad: what would fail only at the first hold
// (exec refusing it) is refused at load naming the field.
func TestProviderFieldsCheckedAtLoad(t *testing.T) {
	noCodex(t)
	tests := []struct{ name, text, has string }{
		{"empty program", "[providers.x]\ncommand = [\"\"]\n", "providers.x.command[0] is empty"},
		{"NUL in an argument", "[providers.x]\ncommand = [\"x\", \"a\\u0000b\"]\n", "providers.x.command[1]"},
		{"NUL in the program", "[providers.x]\ncommand = [\"x\\u0000\"]\n", "providers.x.command[0]"},
		{"= in an env key", "[providers.x]\ncommand = [\"x\"]\nenv = {\"A=B\" = \"1\"}\n", `providers.x.env key "A=B"`},
		{"NUL in an env key", "[providers.x]\ncommand = [\"x\"]\nenv = {\"A\\u0000\" = \"1\"}\n", `providers.x.env key "A\x00"`},
		{"empty env key", "[providers.x]\ncommand = [\"x\"]\nenv = {\"\" = \"1\"}\n", `providers.x.env key ""`},
		{"NUL in an env value", "[providers.x]\ncommand = [\"x\"]\nenv = {A = \"1\\u0000\"}\n", "providers.x.env.A"},
		{"empty name", "[providers.\"\"]\ncommand = [\"x\"]\n", `providers."": want a name`},
		{"NUL in the echo env", "[providers.echo]\nenv = {A = \"\\u0000\"}\n", "providers.echo.env.A"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			err := Parse(tc.text, &c)
			if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), tc.has) {
				t.Fatalf("err %v, want ErrBadValue naming %q", err, tc.has)
			}
		})
	}
}

// TestKeysCaseSensitive: a key that differs from a known one only in case
// is unknown, naming both (BurntSushi/toml alone matches fields
// case-insensitively: INITIALIZE_TIMEOUT overrode initialize_timeout).
func TestKeysCaseSensitive(t *testing.T) {
	noCodex(t)
	for _, text := range []string{
		"initialize_timeout = \"10s\"\nINITIALIZE_TIMEOUT = \"4s\"\n",
		"[Ladder]\ngrace = \"1s\"\n",
		"[providers.x]\nCommand = [\"x\"]\n",
	} {
		c := Default()
		err := Parse(text, &c)
		if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "keys are case-sensitive") {
			t.Errorf("%q: err %v, want ErrUnknownKey naming the case", text, err)
		}
	}
}
