//go:build agents

package acpagents_test

import (
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/acpagents"
)

// The heavy agents (slow starts, 300–550 MiB each) run in make
// test-agents, built with -tags agents.

// TestQwenRawACP: Qwen Code's offline recipe works.
func TestQwenRawACP(t *testing.T) { smoke(t, acpagents.Qwen) }

// TestOpencodeRawACP: opencode's offline recipe works.
func TestOpencodeRawACP(t *testing.T) { smoke(t, acpagents.Opencode) }

// TestClaudeAgentACPRawACP: claude-agent-acp's offline recipe works.
func TestClaudeAgentACPRawACP(t *testing.T) { smoke(t, acpagents.ClaudeACP) }

// TestGeminiRawACP: Gemini CLI's offline recipe works.
func TestGeminiRawACP(t *testing.T) { smoke(t, acpagents.Gemini) }
