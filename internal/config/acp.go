package config

// ProtocolACP is the Agent Client Protocol (PROTOCOL.md "ACP agents as
// providers"): any agent that speaks it over its stdio.
const ProtocolACP = "acp"

// ACPBuiltin is an ACP agent built in when its executable is on PATH.
type ACPBuiltin struct {
	Name string   // the provider's name
	Exe  string   // the executable looked up on PATH
	Args []string // what the agent needs to speak ACP on its stdio
	NPM  string   // the npm package that installs it
}

// ACPBuiltins are the ACP agents built in when found on the daemon's PATH
// at startup, in the order the README lists them.
var ACPBuiltins = []ACPBuiltin{
	{Name: "codex-acp", Exe: "codex-acp", NPM: "@zed-industries/codex-acp"},
	{Name: "copilot", Exe: "copilot", Args: []string{"--acp"}, NPM: "@github/copilot"},
	{Name: "qwen", Exe: "qwen", Args: []string{"--acp"}, NPM: "@qwen-code/qwen-code"},
	{Name: "opencode", Exe: "opencode", Args: []string{"acp"}, NPM: "opencode-ai"},
	{Name: "claude-acp", Exe: "claude-agent-acp", NPM: "@zed-industries/claude-agent-acp"},
	{Name: "gemini", Exe: "gemini", Args: []string{"--acp"}, NPM: "@google/gemini-cli"},
}

// acpBuiltin is the profile of the built-in ACP agent name (ok false when
// name is none).
func acpBuiltin(name string) (Provider, bool) {
	for _, b := range ACPBuiltins {
		if b.Name == name {
			return Provider{Command: append([]string{b.Exe}, b.Args...), Protocol: ProtocolACP}, true
		}
	}
	return Provider{}, false
}

// addACPBuiltins adds every built-in ACP agent whose executable is on PATH.
func addACPBuiltins(c *Config) {
	for _, b := range ACPBuiltins {
		if _, err := lookPath(b.Exe); err == nil {
			c.Providers[b.Name], _ = acpBuiltin(b.Name)
		}
	}
}
