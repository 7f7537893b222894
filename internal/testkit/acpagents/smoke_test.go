package acpagents_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/acpagents"
)

// smoke drives agent a directly over its stdio, no daemon, with its
// offline recipe against its scripted model: initialize (protocol 1,
// loadSession), authenticate when the recipe names a method, session/new,
// a streamed text prompt (the chunks say "hello", end_turn), and a prompt
// whose model reply calls the agent's shell tool: the agent asks
// session/request_permission, runs the command after allow_once (its file
// exists) and ends the turn; then session/cancel while the model's
// stream stalls after its first chunk ends the prompt cancelled. It
// proves the recipe works on this machine.
func smoke(t *testing.T, a *acpagents.Agent) {
	cwd := t.TempDir()
	marker := filepath.Join(cwd, "ran")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	m := a.NewModel(t, acpagents.Say("hel", "lo"), acpagents.Shell("touch "+marker), acpagents.Say("done"), acpagents.Stall(release))
	r := a.NewRecipe(t, m.URL, cwd)
	c := start(t, r, cwd)

	var init struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession bool `json:"loadSession"`
		} `json:"agentCapabilities"`
	}
	c.result(c.call("initialize", map[string]any{"protocolVersion": 1,
		"clientCapabilities": map[string]any{"fs": map[string]any{"readTextFile": false, "writeTextFile": false}, "terminal": false},
		"clientInfo":         map[string]any{"name": "sessiond-test", "version": "0"}}), "initialize", &init)
	if init.ProtocolVersion != 1 || !init.AgentCapabilities.LoadSession {
		t.Fatalf("initialize: %+v", init)
	}
	if r.AuthMethod != "" {
		c.result(c.call("authenticate", map[string]any{"methodId": r.AuthMethod}), "authenticate", nil)
	}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	c.result(c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}), "session/new", &sess)
	if sess.SessionID == "" {
		t.Fatal("session/new: no sessionId")
	}

	text, ans := c.drain(c.call("session/prompt", prompt(sess.SessionID, "say hello")), "text prompt", nil)
	if stop := stopReason(t, ans); text != "hello" || stop != "end_turn" {
		t.Fatalf("text prompt: said %q, stopReason %q", text, stop)
	}
	if rs := m.Requests(); len(rs) == 0 || !slices.Contains(acpagents.ToolNames(rs[0]), a.ShellTool) {
		t.Fatalf("the model was not offered %s", a.ShellTool)
	}

	asked := 0
	_, ans = c.drain(c.call("session/prompt", prompt(sess.SessionID, "run it")), "shell prompt", func(p msg) {
		asked++
		c.respond(p.ID, map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": optionOf(t, p, "allow_once")}})
	})
	if stop := stopReason(t, ans); asked != 1 || stop != "end_turn" {
		t.Fatalf("shell prompt: %d permission request(s), stopReason %q", asked, stop)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}

	cancelled := false
	_, ans = c.drainChunks(c.call("session/prompt", prompt(sess.SessionID, "think slowly")), "stalled prompt", nil, func(string) {
		if !cancelled {
			cancelled = true
			c.notify("session/cancel", map[string]any{"sessionId": sess.SessionID})
		}
	})
	if stop := stopReason(t, ans); !cancelled || stop != "cancelled" {
		t.Fatalf("stalled prompt: cancel sent %v, stopReason %q", cancelled, stop)
	}
}

// prompt is session/prompt's params.
func prompt(sessionID, text string) map[string]any {
	return map[string]any{"sessionId": sessionID, "prompt": []any{map[string]any{"type": "text", "text": text}}}
}

// stopReason is a prompt result's stopReason.
func stopReason(t testing.TB, m msg) string {
	t.Helper()
	var r struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatalf("prompt result %s: %v", m.Result, err)
	}
	return r.StopReason
}

// optionOf is the optionId of a permission request's option of kind.
func optionOf(t testing.TB, m msg, kind string) string {
	t.Helper()
	var p struct {
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
	_ = json.Unmarshal(m.Params, &p)
	for _, o := range p.Options {
		if o.Kind == kind {
			return o.OptionID
		}
	}
	t.Fatalf("permission request without a %s option: %s", kind, m.Params)
	return ""
}

// TestCopilotRawACP: Copilot CLI's offline recipe works (make test).
func TestCopilotRawACP(t *testing.T) { smoke(t, acpagents.Copilot) }
