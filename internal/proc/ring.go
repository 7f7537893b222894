package proc

import "sync"

// ring keeps the last max bytes written to it (a child's stderr tail).
type ring struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newRing(max int) *ring { return &ring{max: max} }

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	if len(p) >= r.max {
		r.b = append(r.b[:0], p[len(p)-r.max:]...)
		return n, nil
	}
	if len(r.b)+len(p) > 2*r.max {
		keep := r.max - len(p)
		r.b = append(r.b[:0], r.b[len(r.b)-keep:]...)
	}
	r.b = append(r.b, p...)
	return n, nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.b
	if len(b) > r.max {
		b = b[len(b)-r.max:]
	}
	return string(b)
}
