package geminimodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// usage is what every answer reports.
var usage = map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}

// response is one GenerateContentResponse holding parts (finish "" leaves
// the candidate open).
func response(parts []any, finish string) map[string]any {
	c := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	if finish != "" {
		c["finishReason"] = finish
	}
	return map[string]any{"candidates": []any{c}, "usageMetadata": usage, "modelVersion": "gemini-2.5-flash"}
}

// data writes one SSE `data:` line and flushes it.
func data(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "data: %s\r\n\r\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// stream answers rep as SSE chunks: one text part per delta, then the
// function call, the last chunk carrying finishReason STOP.
func stream(w http.ResponseWriter, r *http.Request, rep Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for i, d := range rep.Deltas {
		if rep.Stall != nil && i == rep.StallAfter {
			select {
			case <-rep.Stall:
			case <-r.Context().Done():
				return
			}
		}
		finish := ""
		if i == len(rep.Deltas)-1 && rep.Call == nil {
			finish = "STOP"
		}
		data(w, response([]any{map[string]any{"text": d}}, finish))
	}
	if rep.Call != nil {
		data(w, response([]any{map[string]any{"functionCall": map[string]any{"name": rep.Call.Name, "args": rep.Call.Args}}}, "STOP"))
	}
	if len(rep.Deltas) == 0 && rep.Call == nil {
		data(w, response([]any{map[string]any{"text": ""}}, "STOP"))
	}
}

// whole answers rep as one GenerateContentResponse.
func whole(w http.ResponseWriter, rep Reply) {
	var parts []any
	if len(rep.Deltas) > 0 {
		parts = append(parts, map[string]any{"text": strings.Join(rep.Deltas, "")})
	}
	if rep.Call != nil {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": rep.Call.Name, "args": rep.Call.Args}})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(response(parts, "STOP"))
}
