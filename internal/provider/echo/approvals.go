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
	var res struct {
		Decision string `json:"decision"`
	}
	if len(m.Error) > 0 || json.Unmarshal(m.Result, &res) != nil {
		res.Decision = "decline"
	}
	ch <- res.Decision
}

// idKey normalizes a JSON-RPC id: a string's contents or a number's text.
func idKey(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// requestApproval sends a server->client request and returns the channel
// its decision arrives on.
func (s *server) requestApproval(params map[string]any) chan string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextReq++
	ch := make(chan string, 1)
	s.approvals[strconv.Itoa(s.nextReq)] = ch
	s.w.send(map[string]any{"id": s.nextReq, "method": "item/commandExecution/requestApproval", "params": params}, true)
	return ch
}

func (s *server) dropApproval(ch chan string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.approvals {
		if c == ch {
			delete(s.approvals, k)
		}
	}
}
