// Package acpagents runs real ACP agents in tests, offline: it installs
// each pinned npm package into the test cache outside the checkout when
// missing (internal/npminstall), and holds each agent's offline recipe —
// the command, environment and config files (written into a temp HOME)
// that point the agent at a scripted model server on 127.0.0.1
// (internal/testkit/chatmodel or geminimodel) — as measured in
// ../shared/reference/acp-agents-offline.md. The agents, their pins and
// the model API each calls:
//
//	copilot            @github/copilot 1.0.102                 Chat Completions (BYOK)
//	qwen               @qwen-code/qwen-code 0.24.4             Chat Completions
//	opencode           opencode-ai 1.18.33                     Chat Completions (@ai-sdk/openai-compatible)
//	claude-agent-acp   @zed-industries/claude-agent-acp 0.23.1 Anthropic Messages (internal/claudetest)
//	gemini             @google/gemini-cli 0.61.0               Gemini (GOOGLE_GEMINI_BASE_URL)
//
// A missing agent fails the test with its install command, never skips.
// It is imported only by _test.go files and its install command.
package acpagents

import (
	"fmt"
	"io"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/npminstall"
)

// API is the model API an agent calls.
type API int

const (
	// ChatCompletions is OpenAI's POST /v1/chat/completions (chatmodel).
	ChatCompletions API = iota
	// Messages is Anthropic's POST /v1/messages (claudetest).
	Messages
	// GeminiAPI is POST /v1beta/models/M:streamGenerateContent (geminimodel).
	GeminiAPI
)

// Agent is one pinned ACP agent and how it runs offline.
type Agent struct {
	Name string
	API  API
	// ShellTool is the name of the agent's shell tool: a model reply
	// calling it with ShellArgs(cmd) makes the agent ask
	// session/request_permission before it runs cmd.
	ShellTool string
	ShellArgs func(cmd string) map[string]any

	pkg   *npminstall.Package
	setup func(o Options, bin string) (Recipe, error)
}

// The pinned agents.
var (
	Copilot = &Agent{Name: "copilot", API: ChatCompletions, ShellTool: "bash", ShellArgs: copilotShell,
		pkg:   &npminstall.Package{Spec: "@github/copilot@1.0.102", Dir: "copilot@1.0.102", Bin: "copilot", Version: "1.0.102", Manifest: "@github/copilot"},
		setup: copilotSetup}
	Qwen = &Agent{Name: "qwen", API: ChatCompletions, ShellTool: "run_shell_command", ShellArgs: qwenShell,
		pkg:   &npminstall.Package{Spec: "@qwen-code/qwen-code@0.24.4", Dir: "qwen-code@0.24.4", Bin: "qwen", Version: "0.24.4"},
		setup: qwenSetup}
	Opencode = &Agent{Name: "opencode", API: ChatCompletions, ShellTool: "bash", ShellArgs: opencodeShell,
		pkg:   &npminstall.Package{Spec: "opencode-ai@1.18.33", Dir: "opencode-ai@1.18.33", Bin: "opencode", Version: "1.18.33"},
		setup: opencodeSetup}
	ClaudeACP = &Agent{Name: "claude-agent-acp", API: Messages, ShellTool: "Bash", ShellArgs: claudeShell,
		pkg:   &npminstall.Package{Spec: "@zed-industries/claude-agent-acp@0.23.1", Dir: "claude-agent-acp@0.23.1", Bin: "claude-agent-acp", Version: "0.23.1", Manifest: "@zed-industries/claude-agent-acp"},
		setup: claudeSetup}
	Gemini = &Agent{Name: "gemini", API: GeminiAPI, ShellTool: "run_shell_command", ShellArgs: geminiShell,
		pkg:   &npminstall.Package{Spec: "@google/gemini-cli@0.61.0", Dir: "gemini-cli@0.61.0", Bin: "gemini", Version: "0.61.0", Manifest: "@google/gemini-cli"},
		setup: geminiSetup}
)

// All is every pinned agent, in the order the install command installs
// them.
var All = []*Agent{Copilot, Qwen, Opencode, ClaudeACP, Gemini}

// Version is the agent's pinned version.
func (a *Agent) Version() string { return a.pkg.Version }

// Spec is the npm spec installed.
func (a *Agent) Spec() string { return a.pkg.Spec }

// InstallCommand is the command that installs the agent by hand.
func (a *Agent) InstallCommand() string { return a.pkg.InstallCommand() }

// Binary is the agent's executable, installed with npm when missing; a
// machine that cannot install it fails the test with the command to run.
func (a *Agent) Binary(t testing.TB) string {
	t.Helper()
	return a.pkg.Binary(t)
}

// Install is the body of the install command for one agent: the path on
// stdout, or the error and the command to run by hand on stderr; it
// returns the exit code.
func (a *Agent) Install(stdout, stderr io.Writer) int { return a.pkg.Install(stdout, stderr) }

// Named is the agent called name, nil when there is none.
func Named(name string) *Agent {
	for _, a := range All {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Recipe is how to start the agent: its command line and the environment
// to add to the caller's (HOME and the XDG dirs isolated in Options.Home),
// and the authenticate method to call after initialize ("" for none).
type Recipe struct {
	Command    []string
	Env        map[string]string
	AuthMethod string
}

// Options is what a recipe is written for: the model's base URL (as its
// server reports it: chatmodel's ends in /v1), an empty HOME to write the
// agent's config into, and the session's working directory.
type Options struct {
	ModelURL string
	Home     string
	Cwd      string
}

// Recipe writes the agent's config files into o.Home and returns how to
// start it; bin is Binary's path.
func (a *Agent) Recipe(o Options, bin string) (Recipe, error) {
	r, err := a.setup(o, bin)
	if err != nil {
		return Recipe{}, fmt.Errorf("%s recipe: %w", a.Name, err)
	}
	return r, nil
}

// NewRecipe is Recipe in a fresh temp HOME of the test; it fails the test
// when the agent is missing.
func (a *Agent) NewRecipe(t testing.TB, modelURL, cwd string) Recipe {
	t.Helper()
	r, err := a.Recipe(Options{ModelURL: modelURL, Home: t.TempDir(), Cwd: cwd}, a.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
