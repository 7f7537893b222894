package rpc

import (
	"encoding/json"

	"github.com/sessiond/sessiond/internal/api"
)

// maxAttentionQueued bounds the daemon.attention notices queued for one
// connection and not yet written: a connection that stopped reading is
// closed when one more comes (each is at most a title's bytes and a
// little more, so a connection holds at most ~1.1 MB of them).
const maxAttentionQueued = 256

// NotifyAttention sends daemon.attention to every connection that
// negotiated daemon.attention.v1, whatever it attached (PROTOCOL.md
// "Attention"). It does not wait for the writes: each connection has one
// writer goroutine while it has notices queued (counted among its pumps,
// in order), so a connection that stopped reading delays nobody; past
// maxAttentionQueued it is closed.
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
		if c.has(api.CapAttention) {
			c.queueAttention(b, n.SessionID)
		}
	}
}

// queueAttention queues b for c's attention writer, starting it when
// none runs; a connection with maxAttentionQueued notices unwritten is
// closed instead (logged once).
func (c *conn) queueAttention(b []byte, sessionID string) {
	c.mu.Lock()
	if c.closing || c.attnShed {
		c.mu.Unlock()
		return
	}
	if len(c.attnQueue) >= maxAttentionQueued {
		c.attnShed, c.attnQueue = true, nil
		c.mu.Unlock()
		c.log.Warn("closing connection: it reads no daemon.attention", "reason", "attention_backlog",
			"session_id", sessionID, "queued", maxAttentionQueued)
		c.st.Close()
		return
	}
	c.attnQueue = append(c.attnQueue, b)
	start := !c.attnWriting
	if start {
		c.attnWriting = true
		c.pumps.Add(1)
	}
	c.mu.Unlock()
	if start {
		go c.writeAttention()
	}
}

// writeAttention writes c's queued notices in order until none is left
// or a write fails (the stream is closed then: the rest are dropped).
func (c *conn) writeAttention() {
	defer c.pumps.Done()
	for {
		c.mu.Lock()
		if len(c.attnQueue) == 0 {
			c.attnWriting = false
			c.mu.Unlock()
			return
		}
		b := c.attnQueue[0]
		c.attnQueue[0] = nil
		c.attnQueue = c.attnQueue[1:]
		c.mu.Unlock()
		if err := c.st.writeBytes(b); err != nil {
			c.log.Debug("daemon.attention not written", "err", err.Error())
			c.mu.Lock()
			c.attnQueue, c.attnWriting = nil, false
			c.mu.Unlock()
			return
		}
	}
}
