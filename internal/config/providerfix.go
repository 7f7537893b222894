package config

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// builtinInstall names, for each provider built in when its CLI is on
// PATH (Default), the executable and the npm package that installs it.
var builtinInstall = map[string]struct{ exe, npm string }{
	"codex":  {exe: "codex", npm: "@openai/codex"},
	"claude": {exe: "claude", npm: "@anthropic-ai/claude-code"},
}

// maxFixName is the longest provider name a fix repeats in the table it
// suggests; a longer one is never cut there (a cut name names another
// provider).
const maxFixName = 32

// ProviderFix says how to make provider name known to a daemon that
// does not have it: for a built-in one, install its CLI or put it on the
// daemon's PATH (Default adds it at startup), or configure it; for any
// other, add its table to the config. name is what the client sent, in
// full: the table it suggests is valid TOML naming exactly that provider,
// or the fix says why it cannot give one.
func ProviderFix(name string) string {
	table := fmt.Sprintf("(command, protocol = %q, %q or %q) in the daemon's config file (serve --config, default ~/.config/sessiond/config.toml)",
		ProtocolCodexAppServer, ProtocolClaudeStreamJSON, ProtocolACP)
	switch header, why := providerTable(name); {
	case why != "":
		table = "a table for it under [providers] " + table + " (" + why + ")"
	default:
		table = "a " + header + " table " + table
	}
	b, ok := builtinInstall[name]
	for _, ab := range ACPBuiltins {
		if ab.Name == name {
			b, ok = struct{ exe, npm string }{exe: ab.Exe, npm: ab.NPM}, true
		}
	}
	if ok {
		return fmt.Sprintf("%s is added when `%s` is on the daemon's PATH at startup: install it (npm install -g %s) or put it on that PATH, or add %s; then restart the daemon",
			name, b.exe, b.npm, table)
	}
	return "add " + table + ", then restart the daemon"
}

// bareKey is a TOML key that needs no quotes.
var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// providerTable is the TOML table header that configures provider name,
// its key quoted as TOML requires (bare only for [A-Za-z0-9_-]+), or why
// the fix gives none: a name longer than maxFixName bytes (it is not cut),
// or one that is not UTF-8 (no TOML key is).
func providerTable(name string) (header, why string) {
	switch {
	case len(name) > maxFixName:
		return "", fmt.Sprintf("the name is %d bytes, too long to repeat here: the table's key is the name in full, quoted as a TOML string unless it is [A-Za-z0-9_-]+", len(name))
	case !utf8.ValidString(name):
		return "", "the name is not UTF-8, so no TOML key names it: use another name"
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "", "the name holds a control character, which no provider name may: use another name"
	case bareKey.MatchString(name):
		return "[providers." + name + "]", ""
	}
	return "[providers." + tomlQuote(name) + "]", ""
}

// tomlQuote is s as a TOML basic string: `"` and `\` escaped, and every
// control character as \uXXXX (s is UTF-8).
func tomlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
