// Package config loads sessiond's TOML configuration (PROTOCOL.md,
// "Command line and configuration") and fills in the defaults.
package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
)

// Provider protocols implemented.
const (
	ProtocolCodexAppServer   = "codex-app-server"
	ProtocolClaudeStreamJSON = "claude-stream-json"
)

// ClaudeArgs is the built-in `claude` provider's command line after the
// executable (PROTOCOL.md "Provider children"); the adapter adds
// `--resume ID` when the session has a thread.
var ClaudeArgs = []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json",
	"--verbose", "--include-partial-messages", "--permission-prompt-tool", "stdio"}

// builtinClaude is the `claude` provider when `claude` is on PATH, and
// what a [providers.claude] table starts from.
func builtinClaude() Provider {
	return Provider{Command: append([]string{"claude"}, ClaudeArgs...), Protocol: ProtocolClaudeStreamJSON}
}

// Defaults of PROTOCOL.md.
const (
	DefaultIdleTimeout       = 60 * time.Second
	DefaultStartTimeout      = 15 * time.Second
	DefaultStepTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultInitializeTimeout = 10 * time.Second
	DefaultMaxMessageBytes   = 1 << 20
	DefaultGrace             = 1500 * time.Millisecond
	DefaultTermTimeout       = 2 * time.Second
	DefaultKillTimeout       = 1 * time.Second
	// Per-connection limits (not configurable; the page sizes are wire
	// limits, in internal/api).
	DefaultMaxHoldsPerConn = 1024
	DefaultMaxSubsPerConn  = 256
)

// DefaultMaxOutboundBytes bounds the unwritten replies and notifications
// the daemon holds for all its connections together (max_outbound_bytes).
const DefaultMaxOutboundBytes = 64 << 20

// DefaultMaxConnections bounds the client connections open at once
// (max_connections); past it new ones are refused.
const DefaultMaxConnections = 512

// ErrUnknownKey: the file names a key this version does not know.
var ErrUnknownKey = errors.New("unknown config key")

// ErrBadValue: a key holds a value that does not parse or is out of its
// range (ranges.go).
var ErrBadValue = errors.New("bad config value")

// ErrNotRegular: the config path is not a regular file (a FIFO, a device,
// a directory): refused rather than read.
var ErrNotRegular = errors.New("config is not a regular file")

// ErrTooLarge: the config file is larger than MaxFileBytes.
var ErrTooLarge = errors.New("config file too large")

// MaxFileBytes bounds the config file: 1 MiB.
const MaxFileBytes = 1 << 20

// ErrNotFound: a config file named explicitly does not exist.
var ErrNotFound = errors.New("config file not found")

// Provider is one configured provider. An empty Command for "echo" means
// this executable + "provider echo" (the daemon fills it in).
type Provider struct {
	Command  []string
	Env      map[string]string
	Protocol string
	// AuthMethod (protocol acp only): the methodId the daemon
	// authenticates with after initialize (auth_method).
	AuthMethod string
	// Processes is how sessions map to provider processes (processes):
	// ProcessesSession (one per live session) or ProcessesAccount (one
	// runtime per (profile, account) serving every session as a thread).
	Processes string
	// Accounts are the profile's named envs besides DefaultAccount
	// (accounts.go); Failover is the order tried on a rate limit.
	Accounts map[string]Account
	Failover []string
}

// Values of a provider's processes.
const (
	ProcessesSession = "session"
	ProcessesAccount = "account"
)

// Ladder is the close ladder's timing.
type Ladder struct {
	Grace, TermTimeout, KillTimeout time.Duration
}

// Config is the daemon's configuration with defaults applied.
type Config struct {
	IdleTimeout, StartTimeout, StepTimeout, WriteTimeout time.Duration
	// InitializeTimeout: a connection without initialize for this long is
	// closed (initialize_timeout).
	InitializeTimeout time.Duration
	MaxMessageBytes   int
	Ladder            Ladder
	Providers         map[string]Provider

	MaxOutboundBytes int64 // max_outbound_bytes
	MaxConnections   int   // max_connections
	// PortableHistoryBytes bounds a portable switch's history
	// (portable_history_bytes).
	PortableHistoryBytes int

	// CgroupRoot is a cgroup v2 directory the daemon may create its
	// sessions' cgroups in (cgroup_root); "" uses the daemon's own cgroup.
	CgroupRoot string
	Limits     Limits // [limits]: per-session caps; none by default

	// KeepAwake: hold a sleep inhibitor while a turn runs (keep_awake).
	KeepAwake bool
	// Notify is NotifyNone or NotifyDesktop (notify).
	Notify string
}

// lookPath finds codex and claude; a variable so tests can pretend it is (not) installed.
var lookPath = exec.LookPath

// Default is the configuration used when no file exists: the built-in echo
// provider, codex when `codex` is on PATH, claude when `claude` is.
func Default() Config {
	c := Config{
		IdleTimeout:       DefaultIdleTimeout,
		StartTimeout:      DefaultStartTimeout,
		StepTimeout:       DefaultStepTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		InitializeTimeout: DefaultInitializeTimeout,
		MaxMessageBytes:   DefaultMaxMessageBytes,
		Ladder:            Ladder{Grace: DefaultGrace, TermTimeout: DefaultTermTimeout, KillTimeout: DefaultKillTimeout},
		Providers: map[string]Provider{
			"echo": {Protocol: ProtocolCodexAppServer},
		},
	}
	c.MaxOutboundBytes = DefaultMaxOutboundBytes
	c.MaxConnections = DefaultMaxConnections
	c.PortableHistoryBytes = DefaultPortableHistoryBytes
	c.KeepAwake, c.Notify = DefaultKeepAwake, DefaultNotify
	if _, err := lookPath("codex"); err == nil {
		c.Providers["codex"] = Provider{Command: []string{"codex", "app-server"}, Protocol: ProtocolCodexAppServer, Processes: ProcessesAccount}
	}
	if _, err := lookPath("claude"); err == nil {
		c.Providers["claude"] = builtinClaude()
	}
	addACPBuiltins(&c)
	return c
}

// ProviderNames returns the configured provider names, sorted.
func (c Config) ProviderNames() []string {
	names := make([]string, 0, len(c.Providers))
	for n := range c.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

type fileLadder struct {
	Grace       *string `toml:"grace"`
	TermTimeout *string `toml:"term_timeout"`
	KillTimeout *string `toml:"kill_timeout"`
}

type fileProvider struct {
	Command   []string               `toml:"command"`
	Env       map[string]string      `toml:"env"`
	Protocol  string                 `toml:"protocol"`
	Auth      *string                `toml:"auth_method"`
	Processes *string                `toml:"processes"`
	Accounts  map[string]fileAccount `toml:"accounts"`
	Failover  []string               `toml:"failover"`
}

type file struct {
	IdleTimeout     *string                 `toml:"idle_timeout"`
	StartTimeout    *string                 `toml:"start_timeout"`
	StepTimeout     *string                 `toml:"step_timeout"`
	WriteTimeout    *string                 `toml:"write_timeout"`
	InitTimeout     *string                 `toml:"initialize_timeout"`
	MaxMessageBytes *int64                  `toml:"max_message_bytes"`
	MaxOutbound     *int64                  `toml:"max_outbound_bytes"`
	MaxConnections  *int64                  `toml:"max_connections"`
	PortableHistory *int64                  `toml:"portable_history_bytes"`
	Ladder          fileLadder              `toml:"ladder"`
	Providers       map[string]fileProvider `toml:"providers"`
	CgroupRoot      *string                 `toml:"cgroup_root"`
	Limits          fileLimits              `toml:"limits"`
	KeepAwake       *bool                   `toml:"keep_awake"`
	Notify          *string                 `toml:"notify"`
}

// Load reads path over the defaults. explicit says the path was named
// (--config or $SESSIOND_CONFIG): then a missing file is ErrNotFound;
// a missing default file means the defaults.
func Load(path string, explicit bool) (Config, error) {
	c := Default()
	if path == "" {
		return c, nil
	}
	b, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if explicit {
			return c, fmt.Errorf("config %s: %w", path, ErrNotFound)
		}
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if err := Parse(string(b), &c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// readFile reads a regular file of at most MaxFileBytes. It opens with
// O_NONBLOCK so a FIFO cannot block the open, then refuses anything but a
// regular file before reading a byte (/dev/zero would be read forever).
func readFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s): name a TOML file", ErrNotRegular, fileType(fi.Mode()))
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%w: more than %d bytes (1 MiB)", ErrTooLarge, MaxFileBytes)
	}
	return b, nil
}

// fileType names what a non-regular file is.
func fileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// Parse applies TOML text over c.
func Parse(text string, c *Config) error {
	if err := checkSchema(text); err != nil {
		return err
	}
	var f file
	md, err := toml.Decode(text, &f)
	if err != nil {
		return parseError(err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = prefix(k.String())
		}
		return fmt.Errorf("%w: %s", ErrUnknownKey, strings.Join(keys, ", "))
	}
	durs := []struct {
		key string
		src *string
		dst *time.Duration
	}{
		{"idle_timeout", f.IdleTimeout, &c.IdleTimeout},
		{"start_timeout", f.StartTimeout, &c.StartTimeout},
		{"step_timeout", f.StepTimeout, &c.StepTimeout},
		{"write_timeout", f.WriteTimeout, &c.WriteTimeout},
		{"initialize_timeout", f.InitTimeout, &c.InitializeTimeout},
		{"ladder.grace", f.Ladder.Grace, &c.Ladder.Grace},
		{"ladder.term_timeout", f.Ladder.TermTimeout, &c.Ladder.TermTimeout},
		{"ladder.kill_timeout", f.Ladder.KillTimeout, &c.Ladder.KillTimeout},
	}
	for _, d := range durs {
		if d.src == nil {
			continue
		}
		v, err := parseDuration(d.key, *d.src)
		if err != nil {
			return err
		}
		*d.dst = v
	}
	sizes := []struct {
		key string
		src *int64
		set func(int64)
	}{
		{"max_message_bytes", f.MaxMessageBytes, func(n int64) { c.MaxMessageBytes = int(n) }},
		{"max_outbound_bytes", f.MaxOutbound, func(n int64) { c.MaxOutboundBytes = n }},
		{"max_connections", f.MaxConnections, func(n int64) { c.MaxConnections = int(n) }},
		{"portable_history_bytes", f.PortableHistory, func(n int64) { c.PortableHistoryBytes = int(n) }},
	}
	for _, sz := range sizes {
		if sz.src == nil {
			continue
		}
		if err := checkSize(sz.key, *sz.src); err != nil {
			return err
		}
		sz.set(*sz.src)
	}
	for name, fp := range f.Providers {
		p, ok := c.Providers[name]
		if !ok && name == "claude" {
			p = builtinClaude()
		}
		if !ok {
			if b, isACP := acpBuiltin(name); isACP {
				p = b
			}
		}
		if fp.Command != nil {
			p.Command = fp.Command
		}
		if fp.Env != nil {
			p.Env = fp.Env
		}
		if fp.Protocol != "" {
			p.Protocol = fp.Protocol
		}
		if p.Protocol == "" {
			p.Protocol = ProtocolCodexAppServer
		}
		if p.Protocol != ProtocolCodexAppServer && p.Protocol != ProtocolClaudeStreamJSON && p.Protocol != ProtocolACP {
			return fmt.Errorf("%w: providers.%s.protocol = %q: want %q, %q or %q", ErrBadValue, prefix(name), prefix(p.Protocol),
				ProtocolCodexAppServer, ProtocolClaudeStreamJSON, ProtocolACP)
		}
		switch {
		case fp.Processes != nil:
			if *fp.Processes == "" {
				return fmt.Errorf("%w: providers.%s.processes = \"\": want %q or %q (leave the key out for the profile's default)",
					ErrBadValue, prefix(name), ProcessesSession, ProcessesAccount)
			}
			p.Processes = *fp.Processes
		case name == "codex" && p.Protocol == ProtocolCodexAppServer:
			p.Processes = ProcessesAccount // the built-in codex profile's default
		default:
			p.Processes = "" // another protocol than the built-in's: its own default
			if ok && c.Providers[name].Protocol == p.Protocol {
				p.Processes = c.Providers[name].Processes
			}
		}
		if err := checkProcesses(name, p); err != nil {
			return err
		}
		if fp.Auth != nil {
			if p.Protocol != ProtocolACP {
				return fmt.Errorf("%w: providers.%s.auth_method: only protocol %q authenticates (this one is %q)", ErrBadValue, prefix(name), ProtocolACP, p.Protocol)
			}
			if *fp.Auth == "" {
				return fmt.Errorf("%w: providers.%s.auth_method: must name one of the agent's authMethods", ErrBadValue, prefix(name))
			}
			p.AuthMethod = *fp.Auth
		}
		if len(p.Command) == 0 && name != "echo" {
			return fmt.Errorf("%w: providers.%s.command: must name a program", ErrBadValue, prefix(name))
		}
		if err := checkProvider(name, p); err != nil {
			return err
		}
		if err := applyAccounts(name, fp, &p); err != nil {
			return err
		}
		c.Providers[name] = p
	}
	if err := applyAttention(f, c); err != nil {
		return err
	}
	return applyCgroup(f, c)
}
