package journal

import (
	"encoding/json"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

// TestDeltaTextFastPathAgrees: the fast path of deltaText answers exactly
// what json.Unmarshal does, for every shape (and declines what it cannot
// read byte for byte).
func TestDeltaTextFastPathAgrees(t *testing.T) {
	tests := []struct {
		name string
		data string
		fast bool // plainDeltaText takes it
	}{
		{"plain", `{"text":"hello"}`, true},
		{"empty", `{"text":""}`, true},
		{"utf8", `{"text":"héllo ✓"}`, true},
		{"escaped quote", `{"text":"a\"b"}`, false},
		{"escaped newline", `{"text":"a\nb"}`, false},
		{"unicode escape", `{"text":"\u003c"}`, false},
		{"other field", `{"text":"a","providerTurnId":"p"}`, false},
		{"field first", `{"providerTurnId":"p","text":"a"}`, false},
		{"not a string", `{"text":1}`, false},
		{"invalid utf8", "{\"text\":\"\xff\"}", false},
		{"no text", `{}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, fast := plainDeltaText([]byte(tt.data))
			if fast != tt.fast {
				t.Errorf("plainDeltaText took it = %v, want %v", fast, tt.fast)
			}
			var v struct {
				Text *string `json:"text"`
			}
			wantOK := json.Unmarshal([]byte(tt.data), &v) == nil && v.Text != nil
			got, ok := deltaText(event.Draft{Type: event.MessageDelta, Data: json.RawMessage(tt.data)})
			if ok != wantOK || (ok && got != *v.Text) {
				t.Errorf("deltaText = %q, %v; json.Unmarshal says %v, %v", got, ok, v.Text, wantOK)
			}
		})
	}
	for _, s := range []string{"x", "héllo", "a<b>&c", "tab\there", `q"uote`} {
		b, _ := json.Marshal(event.DeltaData{Text: s})
		if got, ok := deltaText(event.Draft{Data: b}); !ok || got != s {
			t.Errorf("round trip of %q: %q, %v", s, got, ok)
		}
	}
}
