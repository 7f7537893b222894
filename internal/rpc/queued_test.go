package rpc

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
)

// TestQueuedMethodsDecodeOnce: a slow method's row prepares its calls
// (queued) and a fast one's answers them (handle), never both; a slow
// method's params name their session's queue once decoded (create's
// none), params that do not decode are keyed as queueKey finds them and
// answered invalid_params when the call runs, and an overlong sessionId
// shares the unkeyed queue.
func TestQueuedMethodsDecodeOnce(t *testing.T) {
	for _, m := range methodList {
		if m.slow != (m.queued != nil) || (m.handle == nil) == (m.queued == nil) {
			t.Errorf("%s: slow %v, handle set %v, queued set %v", m.name, m.slow, m.handle != nil, m.queued != nil)
		}
		if !m.slow {
			continue
		}
		want := "s_aaaaaaaa"
		if m.name == "agentSession.create" {
			want = ""
		}
		if key, _, _ := m.queued(json.RawMessage(`{"sessionId":"s_aaaaaaaa"}`)); key != want {
			t.Errorf("%s: key %q, want %q", m.name, key, want)
		}
		if key, _, _ := m.queued(json.RawMessage(`{"sessionId":"` + string(make([]byte, maxKeyBytes+1)) + `"}`)); key != "" {
			t.Errorf("%s: an overlong sessionId keys %q", m.name, key)
		}
	}
	hold := newTable(methodList)["agentSession.hold"]
	key, run, _ := hold.queued(json.RawMessage(`{"sessionId":"s_bbbbbbbb","ttlMs":"soon"}`))
	if key != "s_bbbbbbbb" {
		t.Errorf("undecodable params keyed %q, want queueKey's s_bbbbbbbb", key)
	}
	if _, err := run(t.Context(), nil); !errors.Is(err, api.ErrInvalidParams) {
		t.Errorf("undecodable params answered %v, want invalid_params", err)
	}
}
