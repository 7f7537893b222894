package chatmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// usage is what every answer reports.
var usage = map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}

// data writes one SSE `data:` line (Chat Completions names no event) and
// flushes it.
func data(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// stream answers rep as chat.completion.chunk events: a role chunk, one
// chunk per delta, the tool call (name and arguments whole), a chunk with
// the finish reason, a usage chunk and [DONE].
func stream(w http.ResponseWriter, r *http.Request, id, model string, rep Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	data(w, chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i, d := range rep.Deltas {
		if rep.Stall != nil && i == rep.StallAfter {
			select {
			case <-rep.Stall:
			case <-r.Context().Done():
				return
			}
		}
		data(w, chunk(map[string]any{"content": d}, nil))
	}
	finish := "stop"
	if rep.Tool != nil {
		args, _ := json.Marshal(rep.Tool.Args)
		data(w, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": rep.Tool.ID, "type": "function",
			"function": map[string]any{"name": rep.Tool.Name, "arguments": string(args)}}}}, nil))
		finish = "tool_calls"
	}
	data(w, chunk(map[string]any{}, finish))
	data(w, map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
		"choices": []any{}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// whole answers rep as one chat.completion (a request without stream).
func whole(w http.ResponseWriter, id, model string, rep Reply) {
	msg := map[string]any{"role": "assistant", "content": strings.Join(rep.Deltas, "")}
	finish := "stop"
	if rep.Tool != nil {
		args, _ := json.Marshal(rep.Tool.Args)
		msg["tool_calls"] = []any{map[string]any{"id": rep.Tool.ID, "type": "function",
			"function": map[string]any{"name": rep.Tool.Name, "arguments": string(args)}}}
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": 1700000000,
		"model": model, "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
}
