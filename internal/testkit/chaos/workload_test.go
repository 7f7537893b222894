package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
)

// maxSessions bounds the sessions the workload creates: every round
// holds each one again, so more would only make rounds slower.
const maxSessions = 5

// pool is the set of session ids the workload created, shared by workers.
type pool struct {
	mu  sync.Mutex
	ids []string
}

func (p *pool) add(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = append(p.ids, id)
}

func (p *pool) pick(rng *rand.Rand) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ids) == 0 {
		return "", false
	}
	return p.ids[rng.Intn(len(p.ids))], true
}

func (p *pool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids)
}

func (p *pool) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ids...)
}

// worker is one client of the workload: it reconnects after a
// "disconnect" and stops when the daemon is gone or stop is closed.
type worker struct {
	name   string
	socket string
	cwd    string
	rng    *rand.Rand
	pool   *pool
	rec    *recorder
	ops    *atomic.Int64
	c      *rpc.Client
	tokens map[string]string // session -> holdToken of this worker's hold
}

var texts = []string{"hello", "/sleep 300", "/sleep 1500", "/crash", "/orphan", "/approve", "/orphan /sleep 400", "/approve /sleep 100", "/flood 2000 50", "/flood 400 200", "/flood 50 4000"}

func (w *worker) dial(ctx context.Context) error {
	c, err := rpc.Dial(ctx, w.socket, rpc.ClientOptions{Name: "chaos-" + w.name, OnNotify: w.rec.notify})
	if err != nil {
		return err
	}
	w.c = c
	return nil
}

// run performs random operations until stop is closed or the daemon stops
// answering (it was killed).
func (w *worker) run(stop <-chan struct{}) {
	defer func() {
		if w.c != nil {
			w.c.Close()
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if w.c == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := w.dial(ctx)
			cancel()
			if err != nil {
				return // the daemon is gone
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := w.step(ctx)
		cancel()
		w.ops.Add(1)
		var re *rpc.Error
		if err != nil && !errors.As(err, &re) {
			return // transport error: the daemon was killed
		}
		if w.c == nil {
			continue // a disconnect: redial
		}
		select {
		case <-w.c.Done():
			return
		default:
		}
	}
}

// step is one random operation; protocol errors (session_not_live,
// turn_running, …) are expected under chaos and ignored by the caller.
func (w *worker) step(ctx context.Context) error {
	n := w.rng.Intn(20)
	if n < 2 || w.pool.len() == 0 {
		if w.pool.len() >= maxSessions {
			return nil
		}
		var info api.SessionInfo
		err := w.c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: w.cwd, Title: w.name}, &info)
		if err == nil {
			w.pool.add(info.SessionID)
		}
		return err
	}
	id, _ := w.pool.pick(w.rng)
	switch {
	case n < 6:
		var r api.HoldResult
		err := w.c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: w.name, Surface: "chaos"}, &r)
		if err == nil {
			w.tokens[id] = r.HoldToken
		}
		return err
	case n < 10:
		text := texts[w.rng.Intn(len(texts))]
		return w.c.Call(ctx, "agentSession.send", map[string]any{"sessionId": id, "text": text,
			"clientMessageId": fmt.Sprintf("%s-%d", w.name, w.rng.Int63())}, nil)
	case n < 12:
		var r api.AttachResult
		err := w.c.Call(ctx, "agentSession.attach", api.AttachParams{SessionID: id, Limit: 4096}, &r)
		if err == nil {
			w.rec.add(r.Events...)
		}
		return err
	case n < 14:
		tok := w.tokens[id]
		delete(w.tokens, id)
		return w.c.Call(ctx, "agentSession.release", api.ReleaseParams{SessionID: id, HolderID: w.name, HoldToken: tok}, nil)
	case n < 15:
		return w.c.Call(ctx, "agentSession.close", api.SessionParams{SessionID: id}, nil)
	case n < 16:
		return w.c.Call(ctx, "agentSession.cancel", api.SessionParams{SessionID: id}, nil)
	case n < 18:
		req, ok := w.rec.pendingApproval(id)
		if !ok {
			return nil
		}
		decision := []string{"approve", "deny"}[w.rng.Intn(2)]
		return w.c.Call(ctx, "agentSession.respond", map[string]any{"sessionId": id, "requestId": req, "decision": decision}, nil)
	default: // disconnect: this worker's holds end through the backstop
		w.c.Close()
		w.c = nil
		w.tokens = map[string]string{}
		return nil
	}
}

// pendingApproval returns a requestId the session asked for and no one
// answered yet, from what the clients saw.
func (r *recorder) pendingApproval(id string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	requested, resolved := map[string]bool{}, map[string]bool{}
	for _, ev := range r.seen[id] {
		var d struct {
			RequestID string `json:"requestId"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		switch ev.Type {
		case event.ApprovalRequested:
			requested[d.RequestID] = true
		case event.ApprovalResolved:
			resolved[d.RequestID] = true
		}
	}
	for req := range requested {
		if !resolved[req] {
			return req, true
		}
	}
	return "", false
}
