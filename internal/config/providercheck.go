package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
)

// MaxProviderName is the longest provider name: the wire's bound on a
// create's `provider` (a longer one could never be named).
const MaxProviderName = 256

// checkProvider refuses at load what exec would refuse at the first hold:
// an empty or unprintable name, an empty program, a NUL in an argument,
// an env key that is empty or holds "=" or NUL, a NUL in an env value.
// Each error names the field.
func checkProvider(name string, p Provider) error {
	if name == "" || len(name) > MaxProviderName || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: providers.%q: want a name of 1 to %d bytes without control characters",
			ErrBadValue, prefix(name), MaxProviderName)
	}
	field := "providers." + prefix(name)
	if len(p.Command) > 0 && p.Command[0] == "" {
		return fmt.Errorf("%w: %s.command[0] is empty: want the program to run", ErrBadValue, field)
	}
	for i, a := range p.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: %s.command[%d] = %q: holds a NUL byte", ErrBadValue, field, i, prefix(a))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%w: %s.env key %q: want a name without \"=\" or NUL", ErrBadValue, field, prefix(k))
		}
		if strings.IndexByte(p.Env[k], 0) >= 0 {
			return fmt.Errorf("%w: %s.env.%s = %q: holds a NUL byte", ErrBadValue, field, prefix(k), prefix(p.Env[k]))
		}
	}
	return nil
}

// checkProcesses refuses a processes value the profile's protocol cannot
// run: an unknown one (naming the allowed set), and "account" for
// claude-stream-json (one conversation per CLI process). codex-app-server
// and acp serve many sessions per process.
func checkProcesses(name string, p Provider) error {
	switch p.Processes {
	case "", ProcessesSession:
		return nil
	case ProcessesAccount:
	default:
		return fmt.Errorf("%w: providers.%s.processes = %q: want %q or %q", ErrBadValue, prefix(name), prefix(p.Processes),
			ProcessesSession, ProcessesAccount)
	}
	switch p.Protocol {
	case ProtocolClaudeStreamJSON:
		return fmt.Errorf("%w: providers.%s.processes = %q: protocol %q serves one conversation per process; only %q is possible",
			ErrBadValue, prefix(name), ProcessesAccount, p.Protocol, ProcessesSession)
	}
	return nil
}

// Shared reports whether the profile's sessions share one runtime per account.
func (p Provider) Shared() bool { return p.Processes == ProcessesAccount }
