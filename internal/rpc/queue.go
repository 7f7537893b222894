package rpc

import (
	"encoding/json"

	"github.com/sessiond/sessiond/internal/api"
)

// Per-(connection, session) queues. A method that can wait (it takes a
// session lock or starts a child; `slow` in the method table) is not run
// on the reading goroutine: it is appended to the queue of the session
// its params name, and that queue's worker runs the calls one after the
// other in the order they were read. A worker runs its queue while it is
// not empty and leaves it when it drains (to wait in the server's pool
// for another queue, workers.go), so an idle connection holds no
// goroutine but its reader.
//
// A connection may have at most maxQueuedCalls calls, and params of at
// most queuedBytesFactor × max_message_bytes (4 MiB by default), waiting
// or running in its queues; a call past either bound is answered
// limit_exceeded at once (the first refusal per connection is logged)
// and the connection goes on.
const (
	maxQueuedCalls    = 4096
	queuedBytesFactor = 4
)

// maxKeyBytes: a sessionId longer than any valid one (they are at most 128
// bytes) shares the connection's queue of unkeyed calls; its handler
// refuses it.
const maxKeyBytes = 128

// sessionQueue is one FIFO of calls; guarded by conn.qmu.
type sessionQueue struct {
	calls []queuedCall
}

type queuedCall struct {
	run  func()
	size int
}

// queueKey is the sessionId params that do not decode into their
// method's type still name, by a small decode of its own (params that do
// decode are keyed by what they decoded to, queued.go). Params without a
// usable sessionId (agentSession.create, or bad input) share the key "".
func queueKey(params json.RawMessage) string {
	if len(params) == 0 || params[0] != '{' {
		return ""
	}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.SessionID) > maxKeyBytes {
		return ""
	}
	return p.SessionID
}

// enqueue appends run to key's queue, starting its worker if the queue
// was idle; a call past the connection's bounds is refused.
func (c *conn) enqueue(key string, size int, run func()) error {
	maxQueuedBytes := queuedBytesFactor * c.srv.o.MaxMessageBytes
	c.qmu.Lock()
	if c.qcalls >= maxQueuedCalls || c.qbytes+size > maxQueuedBytes {
		first := !c.qrefused
		c.qrefused = true
		calls, bytes := c.qcalls, c.qbytes
		c.qmu.Unlock()
		if first {
			c.log.Warn("call refused: too many calls waiting on this connection", "reason", "limit_exceeded",
				"queued_calls", calls, "queued_bytes", bytes, "max_queued_calls", maxQueuedCalls, "max_queued_bytes", maxQueuedBytes)
		}
		return api.Errorf(api.KindLimitExceeded, map[string]any{"limit": "queued_calls",
			"maxCalls": maxQueuedCalls, "maxBytes": maxQueuedBytes},
			"too many calls waiting on this connection (at most %d calls, %d bytes of params)", maxQueuedCalls, maxQueuedBytes)
	}
	c.qcalls++
	c.qbytes += size
	q := c.queues[key]
	start := q == nil
	if start {
		q = &sessionQueue{}
		if c.queues == nil {
			c.queues = map[string]*sessionQueue{}
		}
		c.queues[key] = q
	}
	q.calls = append(q.calls, queuedCall{run: run, size: size})
	c.qmu.Unlock()
	if start {
		c.srv.workers.run(func() { c.work(key, q) })
	}
	return nil
}

// work runs q's calls in order until q is empty, then forgets q.
func (c *conn) work(key string, q *sessionQueue) {
	for {
		c.qmu.Lock()
		if len(q.calls) == 0 {
			delete(c.queues, key)
			c.qmu.Unlock()
			return
		}
		qc := q.calls[0]
		q.calls[0] = queuedCall{}
		q.calls = q.calls[1:]
		c.qmu.Unlock()
		qc.run()
		c.qmu.Lock()
		c.qcalls--
		c.qbytes -= qc.size
		c.qmu.Unlock()
	}
}
