package rpc

import (
	"encoding/json"

	"github.com/sessiond/sessiond/internal/api"
)

// NotifyAttention sends daemon.attention to every connection that
// negotiated daemon.attention.v1, whatever it attached (PROTOCOL.md
// "Attention"). It does not wait for the writes: each goes out on its own
// goroutine, counted among the connection's pumps and after the
// connection's previous one (attnTail: in order), so a connection that
// stopped reading delays nobody (its write_timeout closes it).
func (s *Server) NotifyAttention(n api.AttentionNotice) {
	b, err := json.Marshal(notification{JSONRPC: "2.0", Method: NotifyAttention, Params: n})
	if err != nil {
		s.log.Error("daemon.attention does not marshal", "session_id", n.SessionID, "err", err.Error())
		return
	}
	s.mu.Lock()
	var conns []*conn
	for _, c := range s.conns {
		if c != nil {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		if !c.has(api.CapAttention) {
			continue
		}
		c.mu.Lock()
		if c.closing {
			c.mu.Unlock()
			continue
		}
		c.pumps.Add(1)
		prev, mine := c.attnTail, make(chan struct{})
		c.attnTail = mine
		c.mu.Unlock()
		go func() {
			defer c.pumps.Done()
			defer close(mine)
			if prev != nil {
				<-prev
			}
			if err := c.st.writeBytes(b); err != nil {
				c.log.Debug("daemon.attention not written", "session_id", n.SessionID, "err", err.Error())
			}
		}()
	}
}
