package chaos

import (
	"context"
	"encoding/json"
	"math/rand"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
)

// hostile is a client that attacks the daemon beside the normal workers:
// oversized ids and fields in every method that takes them, subscribers
// and readers that never read their replies, and the largest pages the
// protocol allows. Its calls may fail; what it must never do is change
// what the innocent sessions' journals hold.
type hostile struct {
	socket string
	cwd    string
	rng    *rand.Rand
	pool   *pool
	ops    *atomic.Int64
	c      *rpc.Client
	stuck  []net.Conn // raw connections that sent requests and never read
}

// oversized values: a bbolt key limit plus one, and values past every
// documented bound.
var (
	hugeKey   = strings.Repeat("k", 32769)
	hugeTitle = strings.Repeat("\x1b[31mT\r", 8000)
	hugeID    = strings.Repeat("h", 90000)
)

// maxStuck bounds the never-reading connections one round opens.
const maxStuck = 8

func (h *hostile) run(stop <-chan struct{}) {
	defer func() {
		if h.c != nil {
			h.c.Close()
		}
		for _, c := range h.stuck {
			c.Close()
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if h.c == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			c, err := rpc.Dial(ctx, h.socket, rpc.ClientOptions{Name: "chaos-hostile"})
			cancel()
			if err != nil {
				return // the daemon is gone
			}
			h.c = c
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		h.step(ctx)
		cancel()
		h.ops.Add(1)
		select {
		case <-h.c.Done():
			h.c.Close()
			h.c = nil // closed by the daemon (as it may close an abuser) or killed: redial
		default:
		}
	}
}

// step is one attack; every answer is ignored.
func (h *hostile) step(ctx context.Context) {
	id, ok := h.pool.pick(h.rng)
	if !ok {
		return
	}
	switch n := h.rng.Intn(14); n {
	case 0, 8, 9, 10, 11, 12, 13: // a dedup key bbolt cannot store, aimed at a shared group commit
		h.poison(ctx, id)
	case 1:
		h.c.Call(ctx, "agentSession.hold", map[string]any{"sessionId": id, "holderId": hugeID, "surface": hugeKey}, nil)
	case 2:
		h.c.Call(ctx, "agentSession.create", map[string]any{"provider": "echo", "cwd": h.cwd, "title": hugeTitle}, nil)
	case 3:
		h.c.Call(ctx, "agentSession.release", map[string]any{"sessionId": id, "holderId": hugeKey, "holdToken": hugeKey}, nil)
	case 4:
		h.c.Call(ctx, "agentSession.respond", map[string]any{"sessionId": id, "requestId": hugeKey, "decision": "approve"}, nil)
	case 5:
		h.c.Call(ctx, "agentSession.hold", map[string]any{"sessionId": id, "holderId": "hostile", "ttlMs": int64(1e13)}, nil)
	case 6: // the largest page, read
		var r api.ReadResult
		h.c.Call(ctx, "agentSession.read", api.ReadParams{SessionID: id, Limit: 4096}, &r)
	default: // the largest page and a subscription, never read
		h.stuckConn(id)
	}
}

// poison starts a flood in one session and, while its deltas stream
// through the group commit, sends a dedup key bbolt refuses to another.
func (h *hostile) poison(ctx context.Context, victim string) {
	target, _ := h.pool.pick(h.rng)
	for _, id := range []string{victim, target} {
		h.c.Call(ctx, "agentSession.hold", map[string]any{"sessionId": id, "holderId": "hostile", "ttlMs": 3000}, nil)
	}
	h.c.Call(ctx, "agentSession.send", map[string]any{"sessionId": victim, "text": "/flood 3000 50"}, nil)
	for range 3 {
		h.c.Call(ctx, "agentSession.send", map[string]any{"sessionId": target, "text": "hostile", "clientMessageId": hugeKey}, nil)
	}
}

// stuckConn opens a raw connection, initializes, attaches and reads a
// whole page, and never reads a byte of the answers.
func (h *hostile) stuckConn(id string) {
	if len(h.stuck) >= maxStuck {
		return
	}
	c, err := net.Dial("unix", h.socket)
	if err != nil {
		return
	}
	h.stuck = append(h.stuck, c)
	msgs := []any{
		map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": 1, "client": map[string]any{"name": "chaos-stuck", "version": "0"},
			"capabilities": []string{api.CapAttach}}},
		map[string]any{"jsonrpc": "2.0", "id": 2, "method": "agentSession.attach", "params": map[string]any{"sessionId": id, "limit": 4096}},
	}
	for i := range 4 {
		msgs = append(msgs, map[string]any{"jsonrpc": "2.0", "id": 3 + i, "method": "agentSession.read",
			"params": map[string]any{"sessionId": id, "afterSeq": 0, "limit": 4096}})
	}
	c.SetWriteDeadline(time.Now().Add(time.Second))
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		if _, err := c.Write(append(b, '\n')); err != nil {
			return
		}
	}
}
