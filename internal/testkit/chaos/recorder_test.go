package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/sessiond/sessiond/internal/event"
)

// recorder keeps every event a client saw (attach snapshots and
// agentSession.event notifications), per session and seq, and the
// violations found when two observers disagree.
type recorder struct {
	mu         sync.Mutex
	seen       map[string]map[uint64]event.Event
	violations []string
}

func newRecorder() *recorder {
	return &recorder{seen: map[string]map[uint64]event.Event{}}
}

func (r *recorder) add(evs ...event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		m := r.seen[ev.SessionID]
		if m == nil {
			m = map[uint64]event.Event{}
			r.seen[ev.SessionID] = m
		}
		if old, ok := m[ev.Seq]; ok && !sameEvent(old, ev) {
			r.violations = append(r.violations, fmt.Sprintf("session %s seq %d seen as %s and as %s",
				ev.SessionID, ev.Seq, describe(old), describe(ev)))
			continue
		}
		m[ev.Seq] = ev
	}
}

// notify is the rpc.ClientOptions.OnNotify of every workload client.
func (r *recorder) notify(method string, params json.RawMessage) {
	if method != "agentSession.event" {
		return
	}
	var p struct {
		Event event.Event `json:"event"`
	}
	if json.Unmarshal(params, &p) == nil && p.Event.SessionID != "" {
		r.add(p.Event)
	}
}

// snapshot copies what was seen for one session.
func (r *recorder) snapshot(id string) map[uint64]event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[uint64]event.Event, len(r.seen[id]))
	for k, v := range r.seen[id] {
		out[k] = v
	}
	return out
}

func (r *recorder) takeViolations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.violations
	r.violations = nil
	return v
}

// sameEvent compares what a client can rely on: seq, type, turn, data
// (and the commit time, which the journal assigns once).
func sameEvent(a, b event.Event) bool {
	return a.SessionID == b.SessionID && a.Seq == b.Seq && a.Type == b.Type && a.TurnID == b.TurnID &&
		a.At.Equal(b.At) && jsonEqual(a.Data, b.Data)
}

func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func describe(e event.Event) string {
	return fmt.Sprintf("{seq %d %s turn=%q data=%s}", e.Seq, e.Type, e.TurnID, e.Data)
}
