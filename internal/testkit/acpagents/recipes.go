package acpagents

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The offline recipes, as measured (../shared/reference/acp-agents-offline.md
// "How each agent was started"): what each needs to reach only the model
// server, and the pitfall each setting avoids.

// baseEnv isolates HOME and the XDG dirs in home, so nothing of the
// machine's user config leaks in.
func baseEnv(home string) map[string]string {
	return map[string]string{
		"HOME":               home,
		"XDG_CONFIG_HOME":    filepath.Join(home, ".config"),
		"XDG_DATA_HOME":      filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME":     filepath.Join(home, ".cache"),
		"XDG_STATE_HOME":     filepath.Join(home, ".local", "state"),
		"NO_UPDATE_NOTIFIER": "1",
		"CI":                 "",
	}
}

// with adds kv (key, value, key, value …) to env.
func with(env map[string]string, kv ...string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// writeJSON writes v as indented JSON to path, creating its directory.
func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// Copilot CLI with a BYOK OpenAI-compatible provider: COPILOT_OFFLINE
// needs no GitHub login.
func copilotSetup(o Options, bin string) (Recipe, error) {
	env := with(baseEnv(o.Home),
		"COPILOT_HOME", filepath.Join(o.Home, ".copilot"),
		"COPILOT_OFFLINE", "true",
		"COPILOT_PROVIDER_BASE_URL", o.ModelURL,
		"COPILOT_PROVIDER_TYPE", "openai",
		"COPILOT_PROVIDER_API_KEY", "test",
		"COPILOT_PROVIDER_WIRE_API", "completions",
		"COPILOT_MODEL", "mock-model",
		"COPILOT_PROVIDER_MAX_PROMPT_TOKENS", "100000",
		"COPILOT_PROVIDER_MAX_OUTPUT_TOKENS", "4096")
	return Recipe{Command: []string{bin, "--acp"}, Env: env}, nil
}

func copilotShell(cmd string) map[string]any {
	return map[string]any{"command": cmd, "description": "test command"}
}

// Qwen Code: approval mode default (its ACP default, auto, asks the model
// as a security classifier before the client), no side requests after
// turns (managed memory, follow-up suggestions), no self re-launch.
func qwenSetup(o Options, bin string) (Recipe, error) {
	settings := map[string]any{
		"security":  map[string]any{"auth": map[string]any{"selectedType": "openai"}},
		"model":     map[string]any{"name": "mock-model"},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true},
		"memory":    map[string]any{"enableManagedAutoMemory": false, "enableManagedAutoDream": false},
		"ui":        map[string]any{"enableFollowupSuggestions": false},
	}
	if err := writeJSON(filepath.Join(o.Home, ".qwen", "settings.json"), settings); err != nil {
		return Recipe{}, err
	}
	env := with(baseEnv(o.Home), "OPENAI_API_KEY", "test", "OPENAI_BASE_URL", o.ModelURL,
		"OPENAI_MODEL", "mock-model", "QWEN_CODE_NO_RELAUNCH", "true")
	return Recipe{Command: []string{bin, "--acp", "--approval-mode", "default", "--auth-type", "openai",
		"--openai-base-url", o.ModelURL, "--openai-api-key", "test", "-m", "mock-model"}, Env: env}, nil
}

func qwenShell(cmd string) map[string]any {
	return map[string]any{"command": cmd, "description": "test command", "is_background": false}
}

// opencode: the provider in opencode.json through
// @ai-sdk/openai-compatible, bash asking permission, nothing fetched or
// installed at startup.
func opencodeSetup(o Options, bin string) (Recipe, error) {
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{"mock": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "Mock",
			"options": map[string]any{"baseURL": o.ModelURL, "apiKey": "test"},
			"models":  map[string]any{"mock-model": map[string]any{"name": "Mock Model", "tool_call": true}},
		}},
		"model": "mock/mock-model", "small_model": "mock/mock-model", "autoupdate": false, "share": "disabled",
		"permission": map[string]any{"bash": "ask", "edit": "ask"},
	}
	if err := writeJSON(filepath.Join(o.Home, ".config", "opencode", "opencode.json"), cfg); err != nil {
		return Recipe{}, err
	}
	env := baseEnv(o.Home)
	for _, k := range []string{"MODELS_FETCH", "AUTOUPDATE", "LSP_DOWNLOAD", "DEFAULT_PLUGINS", "SHARE",
		"CLAUDE_CODE", "EXTERNAL_SKILLS", "PROJECT_CONFIG"} {
		env["OPENCODE_DISABLE_"+k] = "1"
	}
	return Recipe{Command: []string{bin, "acp", "--cwd", o.Cwd}, Env: env}, nil
}

func opencodeShell(cmd string) map[string]any {
	return map[string]any{"command": cmd, "description": "test command"}
}

// claude-agent-acp (Claude Code inside): IS_SANDBOX=1, or as root the CLI
// refuses the bypass flag the adapter passes and session/new fails with
// "Query closed before response received".
func claudeSetup(o Options, bin string) (Recipe, error) {
	dir := filepath.Join(o.Home, ".claude")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Recipe{}, err
	}
	env := with(baseEnv(o.Home), "CLAUDE_CONFIG_DIR", dir, "ANTHROPIC_BASE_URL", strings.TrimSuffix(o.ModelURL, "/"),
		"ANTHROPIC_API_KEY", "test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1", "DISABLE_AUTOUPDATER", "1",
		"DISABLE_TELEMETRY", "1", "DISABLE_ERROR_REPORTING", "1", "IS_SANDBOX", "1")
	return Recipe{Command: []string{bin}, Env: env}, nil
}

func claudeShell(cmd string) map[string]any {
	return map[string]any{"command": cmd, "description": "test command"}
}

// Gemini CLI: --acp (--experimental-acp is deprecated), an API key the
// model server ignores, authenticate gemini-api-key after initialize.
func geminiSetup(o Options, bin string) (Recipe, error) {
	settings := map[string]any{
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true},
		"model":     map[string]any{"name": "gemini-2.5-flash"},
	}
	if err := writeJSON(filepath.Join(o.Home, ".gemini", "settings.json"), settings); err != nil {
		return Recipe{}, err
	}
	env := with(baseEnv(o.Home), "GEMINI_API_KEY", "test", "GOOGLE_GEMINI_BASE_URL", strings.TrimSuffix(o.ModelURL, "/"),
		"GEMINI_CLI_NO_RELAUNCH", "true")
	return Recipe{Command: []string{bin, "--acp"}, Env: env, AuthMethod: "gemini-api-key"}, nil
}

func geminiShell(cmd string) map[string]any {
	return map[string]any{"command": cmd, "description": "test command"}
}

// String is the recipe as a shell line (what a failing test logs).
func (r Recipe) String() string {
	var b strings.Builder
	for k, v := range r.Env {
		fmt.Fprintf(&b, "%s=%q ", k, v)
	}
	return b.String() + strings.Join(r.Command, " ")
}
