package rpc

import "sync"

// workerPool runs the per-(connection, session) queues' workers (queue.go).
// A goroutine that has run a queue to its end waits in the pool for the
// next queue instead of exiting, up to maxIdleWorkers of them: a new
// goroutine per queued call started on a small stack and grew it (a stack
// copy) on every call, which was most of what a queued call cost beyond
// an inline one. The pool belongs to the server, not to a connection, so
// an idle connection still holds no goroutine but its reader; the pool's
// idle workers exit when the server closes.
type workerPool struct {
	mu     sync.Mutex
	idle   []chan func() // each idle worker's hand-off, most recent last
	closed bool
	live   int // workers running or idle
}

// maxIdleWorkers bounds the workers kept waiting.
const maxIdleWorkers = 64

// run runs job on an idle worker, or a new one.
func (p *workerPool) run(job func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		ch := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		ch <- job // buffered: never blocks
		return
	}
	p.live++
	p.mu.Unlock()
	go p.loop(job)
}

// loop runs jobs until the pool is full or closed.
func (p *workerPool) loop(job func()) {
	var ch chan func()
	for job != nil {
		job()
		job = nil // nothing of it stays reachable while waiting
		p.mu.Lock()
		if p.closed || len(p.idle) >= maxIdleWorkers {
			p.live--
			p.mu.Unlock()
			return
		}
		if ch == nil {
			ch = make(chan func(), 1)
		}
		p.idle = append(p.idle, ch)
		p.mu.Unlock()
		job = <-ch // nil: the pool closed
	}
	p.mu.Lock()
	p.live--
	p.mu.Unlock()
}

// close ends the idle workers; a worker still running exits when done.
func (p *workerPool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, ch := range idle {
		close(ch)
	}
}
