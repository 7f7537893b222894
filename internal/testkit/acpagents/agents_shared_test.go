//go:build agents

package acpagents_test

import (
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/acpagents"
)

// TestQwenShared: Qwen Code serving two sessions in one process.
func TestQwenShared(t *testing.T) { shared(t, acpagents.Qwen) }

// TestOpencodeShared: opencode serving two sessions in one process.
func TestOpencodeShared(t *testing.T) { shared(t, acpagents.Opencode) }

// TestClaudeAgentACPShared: claude-agent-acp serving two sessions in one
// process.
func TestClaudeAgentACPShared(t *testing.T) { shared(t, acpagents.ClaudeACP) }

// TestGeminiShared: Gemini CLI serving two sessions in one process.
func TestGeminiShared(t *testing.T) { shared(t, acpagents.Gemini) }
