package echo

import (
	"encoding/json"
	"strconv"
)

// handleResponse delivers the client's answer to one of our approval requests.
func (s *server) handleResponse(m *inMsg) {
	key := idKey(m.ID)
	s.mu.Lock()
	ch, ok := s.approvals[key]
	delete(s.approvals, key)
	s.mu.Unlock()
	if !ok {
		s.log.Warn("response to unknown request", "id", key)
		return
	}
	if len(m.Error) > 0 {
		ch <- nil
		return
	}
	ch <- m.Result
}

// decisionOf reads {decision} from a result; an error answer (nil) or any
// other shape is a decline.
func decisionOf(result json.RawMessage) string {
	var res struct {
		Decision string `json:"decision"`
	}
	if result == nil || json.Unmarshal(result, &res) != nil || res.Decision == "" {
		return "decline"
	}
	return res.Decision
}

// idKey normalizes a JSON-RPC id: a string's contents or a number's text.
func idKey(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// request sends a server->client request and returns the channel its
// result arrives on (nil for an error answer).
func (s *server) request(method string, params map[string]any) chan json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextReq++
	ch := make(chan json.RawMessage, 1)
	s.approvals[strconv.Itoa(s.nextReq)] = ch
	s.w.send(map[string]any{"id": s.nextReq, "method": method, "params": params}, true)
	return ch
}

func (s *server) dropApproval(ch chan json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.approvals {
		if c == ch {
			delete(s.approvals, k)
		}
	}
}
