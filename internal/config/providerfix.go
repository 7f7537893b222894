package config

import "fmt"

// builtinInstall names, for each provider built in when its CLI is on
// PATH (Default), the executable and the npm package that installs it.
var builtinInstall = map[string]struct{ exe, npm string }{
	"codex":  {exe: "codex", npm: "@openai/codex"},
	"claude": {exe: "claude", npm: "@anthropic-ai/claude-code"},
}

// ProviderFix says how to make provider name known to a daemon that
// does not have it: for a built-in one, install its CLI or put it on the
// daemon's PATH (Default adds it at startup), or configure it; for any
// other, add its table to the config. name is what the client sent, cut
// for messages by the caller.
func ProviderFix(name string) string {
	table := fmt.Sprintf("a [providers.%s] table (command, protocol = %q, %q or %q) in the daemon's config file (serve --config, default ~/.config/sessiond/config.toml)",
		name, ProtocolCodexAppServer, ProtocolClaudeStreamJSON, ProtocolACP)
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
