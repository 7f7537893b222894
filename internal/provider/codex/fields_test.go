package codex

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// readFields lists every field the adapter reads from codex's messages, as
// "Type:path" (path segments are property names; "[]" steps into array
// items; "type=x" picks the variant of a tagged union). A codex release
// that renames or drops one of them turns TestAdapterReadsExistingFields
// red, even where an absent field would only silently read as empty.
var readFields = []string{
	"InitializeResponse:userAgent",
	"ThreadStartResponse:thread.id", "ThreadResumeResponse:thread.id", "TurnStartResponse:turn.id",
	"TurnStartedNotification:threadId", "TurnStartedNotification:turn.id",
	"TurnCompletedNotification:threadId", "TurnCompletedNotification:turn.id",
	"TurnCompletedNotification:turn.status", "TurnCompletedNotification:turn.error.message",
	"ErrorNotification:error.message", "ErrorNotification:willRetry", "ErrorNotification:turnId",
	"AgentMessageDeltaNotification:delta", "AgentMessageDeltaNotification:itemId", "AgentMessageDeltaNotification:turnId",
	"CommandExecutionOutputDeltaNotification:delta", "CommandExecutionOutputDeltaNotification:itemId",
	"ReasoningTextDeltaNotification:delta", "ReasoningSummaryTextDeltaNotification:delta", "PlanDeltaNotification:delta",
	"FileChangeOutputDeltaNotification:delta", "FileChangePatchUpdatedNotification:changes.[].diff",
	"McpToolCallProgressNotification:message", "TerminalInteractionNotification:stdin",
	"TurnPlanUpdatedNotification:explanation", "TurnPlanUpdatedNotification:plan.[].step", "TurnPlanUpdatedNotification:plan.[].status",
	"TurnDiffUpdatedNotification:diff",
	"ThreadTokenUsageUpdatedNotification:tokenUsage.last.inputTokens",
	"ThreadTokenUsageUpdatedNotification:tokenUsage.last.cachedInputTokens",
	"ThreadTokenUsageUpdatedNotification:tokenUsage.last.outputTokens",
	"ThreadTokenUsageUpdatedNotification:tokenUsage.last.reasoningOutputTokens",
	"ThreadTokenUsageUpdatedNotification:tokenUsage.last.totalTokens",
	"ThreadTokenUsageUpdatedNotification:tokenUsage.modelContextWindow",
	"ServerRequestResolvedNotification:requestId",
	"WarningNotification:message", "ConfigWarningNotification:summary", "ConfigWarningNotification:details",
	"DeprecationNoticeNotification:summary", "ModelReroutedNotification:fromModel", "ModelReroutedNotification:toModel",
	"ItemStartedNotification:item", "ItemCompletedNotification:item", "ItemCompletedNotification:turnId",
	"ItemCompletedNotification:item.type=agentMessage.text",
	"ItemCompletedNotification:item.type=reasoning.summary", "ItemCompletedNotification:item.type=reasoning.content",
	"ItemCompletedNotification:item.type=commandExecution.command", "ItemCompletedNotification:item.type=commandExecution.cwd",
	"ItemCompletedNotification:item.type=commandExecution.exitCode", "ItemCompletedNotification:item.type=commandExecution.durationMs",
	"ItemCompletedNotification:item.type=commandExecution.aggregatedOutput", "ItemCompletedNotification:item.type=commandExecution.status",
	"ItemCompletedNotification:item.type=fileChange.changes.[].path", "ItemCompletedNotification:item.type=fileChange.changes.[].diff",
	"ItemCompletedNotification:item.type=fileChange.changes.[].kind.type", "ItemCompletedNotification:item.type=fileChange.status",
	"ItemCompletedNotification:item.type=mcpToolCall.server", "ItemCompletedNotification:item.type=mcpToolCall.tool",
	"ItemCompletedNotification:item.type=mcpToolCall.arguments", "ItemCompletedNotification:item.type=mcpToolCall.result",
	"ItemCompletedNotification:item.type=mcpToolCall.error",
	"ItemCompletedNotification:item.type=dynamicToolCall.tool", "ItemCompletedNotification:item.type=dynamicToolCall.arguments",
	"ItemCompletedNotification:item.type=dynamicToolCall.contentItems", "ItemCompletedNotification:item.type=dynamicToolCall.success",
	"ItemCompletedNotification:item.type=collabAgentToolCall.tool", "ItemCompletedNotification:item.type=collabAgentToolCall.prompt",
	"ItemCompletedNotification:item.type=webSearch.query", "ItemCompletedNotification:item.type=plan.text",
	"ItemCompletedNotification:item.type=contextCompaction.id",
	"CommandExecutionRequestApprovalParams:itemId", "FileChangeRequestApprovalParams:itemId",
	"PermissionsRequestApprovalParams:itemId", "PermissionsRequestApprovalParams:permissions",
	"ToolRequestUserInputParams:itemId", "ToolRequestUserInputParams:questions.[].id",
}

func TestAdapterReadsExistingFields(t *testing.T) {
	dir := codextest.SchemaDir(t)
	for _, f := range readFields {
		typ, path, _ := strings.Cut(f, ":")
		doc := loadSchema(t, dir, typ)
		if !hasPath(doc, doc, strings.Split(path, ".")) {
			t.Errorf("codex %s's %s has no %s", codextest.Version, typ, path)
		}
	}
}

func loadSchema(t *testing.T, dir, typ string) map[string]any {
	for _, sub := range []string{"", "v2", "v1"} {
		b, err := os.ReadFile(filepath.Join(dir, sub, typ+".json"))
		if err != nil {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	t.Fatalf("schema has no type %s", typ)
	return nil
}

// hasPath reports whether node (resolved against root's definitions) has
// path, looking through $ref, allOf/anyOf/oneOf branches.
func hasPath(root, node map[string]any, path []string) bool {
	if ref, ok := node["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/definitions/")
		def, _ := root["definitions"].(map[string]any)[name].(map[string]any)
		return def != nil && hasPath(root, def, path)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if bs, ok := node[k].([]any); ok {
			for _, b := range bs {
				if bm, ok := b.(map[string]any); ok && hasPath(root, bm, path) {
					return true
				}
			}
		}
	}
	if len(path) == 0 {
		return true
	}
	seg := path[0]
	if seg == "[]" {
		items, ok := node["items"].(map[string]any)
		return ok && hasPath(root, items, path[1:])
	}
	props, _ := node["properties"].(map[string]any)
	if k, v, ok := strings.Cut(seg, "="); ok { // pick the variant tagged k=v
		tag, _ := props[k].(map[string]any)
		enum, _ := tag["enum"].([]any)
		return len(enum) == 1 && enum[0] == v && hasPath(root, node, path[1:])
	}
	switch child := props[seg].(type) {
	case map[string]any:
		return hasPath(root, child, path[1:])
	case bool: // "arguments": true — any value
		return child && len(path) == 1
	}
	return false
}
