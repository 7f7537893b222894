package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func noCodex(t *testing.T) {
	t.Helper()
	old := lookPath
	lookPath = func(string) (string, error) { return "", errors.New("not found") }
	t.Cleanup(func() { lookPath = old })
}

func TestDefaults(t *testing.T) {
	noCodex(t)
	c := Default()
	want := Config{
		IdleTimeout: 60 * time.Second, StartTimeout: 15 * time.Second, StepTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, MaxMessageBytes: 1 << 20,
		Ladder: Ladder{Grace: 1500 * time.Millisecond, TermTimeout: 2 * time.Second, KillTimeout: time.Second},
	}
	c2 := c
	c2.Providers = nil
	if c2.IdleTimeout != want.IdleTimeout || c2.StartTimeout != want.StartTimeout || c2.StepTimeout != want.StepTimeout ||
		c2.WriteTimeout != want.WriteTimeout || c2.MaxMessageBytes != want.MaxMessageBytes || c2.Ladder != want.Ladder {
		t.Fatalf("defaults = %+v, want %+v", c2, want)
	}
	if got := strings.Join(c.ProviderNames(), ","); got != "echo" {
		t.Fatalf("providers = %s, want echo only when codex is not on PATH", got)
	}
	lookPath = func(name string) (string, error) {
		if name == "codex" {
			return "/usr/bin/codex", nil
		}
		return "", errors.New("not found")
	}
	if got := strings.Join(Default().ProviderNames(), ","); got != "codex,echo" {
		t.Fatalf("providers = %s, want codex,echo when codex is on PATH", got)
	}
	lookPath = func(name string) (string, error) { return "/usr/bin/" + name, nil }
	c = Default()
	if got := strings.Join(c.ProviderNames(), ","); got != "claude,claude-acp,codex,codex-acp,copilot,echo,gemini,opencode,qwen" {
		t.Fatalf("providers = %s, want claude, codex and every ACP agent when all are on PATH", got)
	}
	for name, want := range map[string]string{"codex-acp": "codex-acp", "copilot": "copilot --acp", "qwen": "qwen --acp",
		"opencode": "opencode acp", "claude-acp": "claude-agent-acp", "gemini": "gemini --acp"} {
		if p := c.Providers[name]; p.Protocol != ProtocolACP || strings.Join(p.Command, " ") != want {
			t.Errorf("%s = %+v, want %q over acp", name, p, want)
		}
	}
	if cl := c.Providers["claude"]; cl.Protocol != ProtocolClaudeStreamJSON ||
		strings.Join(cl.Command, " ") != "claude -p --input-format stream-json --output-format stream-json --verbose --include-partial-messages --permission-prompt-tool stdio" {
		t.Fatalf("claude = %+v", cl)
	}
}

func TestLoadFiles(t *testing.T) {
	noCodex(t)
	dir := filepath.Join("..", "..", "testdata", "configs")
	tests := []struct {
		name     string
		path     string
		explicit bool
		wantErr  error
		errHas   string
		check    func(t *testing.T, c Config)
	}{
		{name: "full", path: filepath.Join(dir, "full.toml"), check: func(t *testing.T, c Config) {
			if c.IdleTimeout != 90*time.Second || c.StepTimeout != 5*time.Second || c.WriteTimeout != 10*time.Second ||
				c.MaxMessageBytes != 2<<20 || c.Ladder.Grace != 500*time.Millisecond || c.Ladder.KillTimeout != 750*time.Millisecond {
				t.Fatalf("got %+v", c)
			}
			p := c.Providers["codex"]
			if strings.Join(p.Command, " ") != "codex app-server" || p.Env["CODEX_HOME"] != "/home/me/.codex" {
				t.Fatalf("codex = %+v", p)
			}
			if g := c.Providers["gemini"]; g.Protocol != ProtocolACP || g.AuthMethod != "gemini-api-key" {
				t.Fatalf("gemini = %+v", g)
			}
			if _, ok := c.Providers["echo"]; !ok {
				t.Fatal("echo provider lost")
			}
			if c.KeepAwake || c.Notify != NotifyDesktop {
				t.Fatalf("keep_awake %v notify %q", c.KeepAwake, c.Notify)
			}
		}},
		{name: "unknown key", path: filepath.Join(dir, "unknown-key.toml"), wantErr: ErrUnknownKey, errHas: "idle_timout"},
		{name: "bad duration", path: filepath.Join(dir, "bad-duration.toml"), wantErr: ErrBadValue, errHas: "ladder.grace"},
		{name: "missing default", path: filepath.Join(t.TempDir(), "none.toml"), check: func(t *testing.T, c Config) {
			if c.IdleTimeout != DefaultIdleTimeout {
				t.Fatalf("got %+v", c)
			}
		}},
		{name: "missing named", path: filepath.Join(t.TempDir(), "none.toml"), explicit: true, wantErr: ErrNotFound, errHas: "none.toml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.path, tc.explicit)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want %v naming %q", err, tc.wantErr, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestParseErrors(t *testing.T) {
	noCodex(t)
	tests := []struct {
		name, text, errHas string
		wantErr            error
	}{
		{"nested unknown", "[ladder]\nwait = \"1s\"\n", "ladder.wait", ErrUnknownKey},
		{"provider unknown", "[providers.x]\ncommand=[\"x\"]\nshell = true\n", "providers.x.shell", ErrUnknownKey},
		{"negative", "idle_timeout = \"-1s\"\n", "idle_timeout", ErrBadValue},
		{"tiny max", "max_message_bytes = 3\n", "max_message_bytes", ErrBadValue},
		{"no connections", "max_connections = 0\n", "max_connections", ErrBadValue},
		{"negative initialize", "initialize_timeout = \"-1s\"\n", "initialize_timeout", ErrBadValue},
		{"protocol", "[providers.x]\ncommand=[\"x\"]\nprotocol=\"mcp\"\n", "providers.x.protocol", ErrBadValue},
		{"auth_method not acp", "[providers.x]\ncommand=[\"x\"]\nauth_method=\"k\"\n", "providers.x.auth_method", ErrBadValue},
		{"auth_method empty", "[providers.x]\ncommand=[\"x\"]\nprotocol=\"acp\"\nauth_method=\"\"\n", "providers.x.auth_method", ErrBadValue},
		{"processes account claude", "[providers.x]\ncommand=[\"x\"]\nprotocol=\"claude-stream-json\"\nprocesses=\"account\"\n", `providers.x.processes = "account": protocol "claude-stream-json" serves one conversation per process`, ErrBadValue},
		{"processes empty", "[providers.codex]\nprocesses=\"\"\n", `providers.codex.processes = "": want "session" or "account"`, ErrBadValue},
		{"processes other", "[providers.x]\ncommand=[\"x\"]\nprocesses=\"thread\"\n", `providers.x.processes = "thread": want "session" or "account"`, ErrBadValue},
		{"no command", "[providers.x]\nenv={A=\"b\"}\n", "providers.x.command", ErrBadValue},
		{"syntax", "idle_timeout = \n", "", ErrBadValue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			err := Parse(tc.text, &c)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("err = %v, want %v naming %q", err, tc.wantErr, tc.errHas)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	env := func(m map[string]string) Getenv { return func(k string) string { return m[k] } }
	cfg := []struct {
		name     string
		flag     string
		env      map[string]string
		want     string
		explicit bool
	}{
		{"flag", "/f.toml", map[string]string{"SESSIOND_CONFIG": "/e.toml"}, "/f.toml", true},
		{"env", "", map[string]string{"SESSIOND_CONFIG": "/e.toml", "XDG_CONFIG_HOME": "/x"}, "/e.toml", true},
		{"xdg", "", map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/sessiond/config.toml", false},
		{"home", "", map[string]string{"HOME": "/h"}, "/h/.config/sessiond/config.toml", false},
	}
	for _, tc := range cfg {
		t.Run("config "+tc.name, func(t *testing.T) {
			p, ex := ConfigPath(tc.flag, env(tc.env))
			if p != tc.want || ex != tc.explicit {
				t.Fatalf("got %s %v, want %s %v", p, ex, tc.want, tc.explicit)
			}
		})
	}
	st := []struct {
		name, flag string
		env        map[string]string
		want       string
	}{
		{"flag", "/s", map[string]string{"SESSIOND_STATE_DIR": "/e"}, "/s"},
		{"env", "", map[string]string{"SESSIOND_STATE_DIR": "/e", "XDG_STATE_HOME": "/x"}, "/e"},
		{"xdg", "", map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/h"}, "/x/sessiond"},
		{"home", "", map[string]string{"HOME": "/h"}, "/h/.local/state/sessiond"},
	}
	for _, tc := range st {
		t.Run("state "+tc.name, func(t *testing.T) {
			d, err := StateDir(tc.flag, env(tc.env))
			if err != nil || d != tc.want {
				t.Fatalf("got %s %v, want %s", d, err, tc.want)
			}
		})
	}
	wd, _ := os.Getwd()
	if d, _ := StateDir("rel", env(nil)); d != filepath.Join(wd, "rel") {
		t.Fatalf("relative state dir = %s, want absolute", d)
	}
}

// An ACP profile: protocol acp with auth_method; a table naming a built-in
// ACP agent that is not on PATH starts from its built-in command; an ACP
// profile may share one agent process per account.
func TestParseACP(t *testing.T) {
	noCodex(t)
	c := Default()
	err := Parse("[providers.mine]\ncommand=[\"my-agent\",\"--acp\"]\nprotocol=\"acp\"\nauth_method=\"api-key\"\nprocesses=\"session\"\n"+
		"[providers.gemini]\nenv={GEMINI_API_KEY=\"k\"}\nauth_method=\"gemini-api-key\"\n"+
		"[providers.pooled]\ncommand=[\"my-agent\"]\nprotocol=\"acp\"\nprocesses=\"account\"\n", &c)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Providers["pooled"]; !p.Shared() || p.Protocol != ProtocolACP {
		t.Fatalf("pooled = %+v", p)
	}
	if p := c.Providers["mine"]; p.Protocol != ProtocolACP || p.AuthMethod != "api-key" || strings.Join(p.Command, " ") != "my-agent --acp" {
		t.Fatalf("mine = %+v", p)
	}
	if p := c.Providers["gemini"]; p.Protocol != ProtocolACP || p.AuthMethod != "gemini-api-key" || strings.Join(p.Command, " ") != "gemini --acp" {
		t.Fatalf("gemini = %+v", p)
	}
	if fix := ProviderFix("qwen"); !strings.Contains(fix, "npm install -g @qwen-code/qwen-code") {
		t.Fatalf("ProviderFix(qwen) = %s", fix)
	}
}

// TestProcessesDefaults: the built-in codex profile shares one runtime per
// account, every other profile runs a process per session, and a profile
// may choose either.
func TestProcessesDefaults(t *testing.T) {
	old := lookPath
	lookPath = func(f string) (string, error) { return "/usr/bin/" + f, nil }
	t.Cleanup(func() { lookPath = old })
	c := Default()
	if err := Parse("[providers.echo2]\ncommand=[\"x\"]\nprocesses=\"account\"\n[providers.solo]\ncommand=[\"x\"]\n", &c); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"codex": true, "echo2": true, "echo": false, "claude": false, "solo": false} {
		if got := c.Providers[name].Shared(); got != want {
			t.Errorf("%s: shared = %v, want %v (processes %q)", name, got, want, c.Providers[name].Processes)
		}
	}
	c = Default()
	err := Parse("[providers.codex]\nprocesses=\"session\"\n", &c)
	if err != nil || c.Providers["codex"].Shared() {
		t.Fatalf("codex with processes=session: shared=%v err=%v", c.Providers["codex"].Shared(), err)
	}
}
