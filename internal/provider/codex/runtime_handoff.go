package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sessiond/sessiond/internal/provider"
)

// runtimeHandoffVersion is the version of runtimeState; AdoptRuntime
// refuses another.
const runtimeHandoffVersion = 1

// runtimeState is what a shared runtime knows beyond its threads: the
// request-id space (the next id, so a new request never reuses one the
// provider saw), the threads bound to a session (each handed over with
// its own state, installed by AdoptThread), and the threads that were
// detached but stay loaded in the process (their late lines are dropped
// quietly, not logged as an unknown thread's).
type runtimeState struct {
	V        int      `json:"v"`
	Next     int64    `json:"next"`
	Threads  []string `json:"threads,omitempty"`
	Detached []string `json:"detached,omitempty"`
}

var (
	_ provider.RuntimeHandover = (*Runtime)(nil)
	_ provider.AdoptedRuntime  = (*Runtime)(nil)
	_ provider.AdoptRuntime    = AdoptRuntime
)

// Pause parks the runtime's reader at a line boundary (every thread with
// it) and returns the runtime's state (provider.RuntimeHandover).
func (r *Runtime) Pause(ctx context.Context) (provider.Paused, error) {
	d, ok := r.o.Out.(provider.ReadDeadliner)
	if !ok {
		return provider.Paused{}, fmt.Errorf("codex runtime: stdout %T: %w", r.o.Out, provider.ErrNoHandover)
	}
	p := &pauseReq{parked: make(chan []byte, 1), resume: make(chan struct{})}
	r.mu.Lock()
	if r.pause != nil {
		r.mu.Unlock()
		return provider.Paused{}, fmt.Errorf("codex runtime: already paused: %w", provider.ErrNoHandover)
	}
	r.pause = p
	r.mu.Unlock()
	if err := d.SetReadDeadline(time.Unix(1, 0)); err != nil { // in the past: the read in progress returns now
		r.Resume()
		return provider.Paused{}, fmt.Errorf("codex runtime: pause stdout: %w: %w", provider.ErrNoHandover, err)
	}
	var unparsed []byte
	select {
	case unparsed = <-p.parked:
	case <-r.done:
		r.Resume()
		return provider.Paused{}, fmt.Errorf("codex runtime: %w", ErrExited)
	case <-ctx.Done():
		r.Resume()
		return provider.Paused{}, fmt.Errorf("codex runtime: pause: %w", context.Cause(ctx))
	}
	// A request still waiting for its answer: the answer would come back
	// to an image whose caller is gone.
	for _, a := range r.adapters() {
		a.mu.Lock()
		waiting := ""
		for _, c := range a.calls {
			waiting = c.method
		}
		a.mu.Unlock()
		if waiting != "" {
			r.Resume()
			return provider.Paused{}, fmt.Errorf("codex runtime: %s: %w", waiting, provider.ErrRequestInFlight)
		}
	}
	r.mu.Lock()
	st := runtimeState{V: runtimeHandoffVersion, Next: r.next,
		Threads: slices.Sorted(maps.Keys(r.threads)), Detached: slices.Sorted(maps.Keys(r.detached))}
	r.mu.Unlock()
	b, err := json.Marshal(st)
	if err != nil {
		r.Resume()
		return provider.Paused{}, fmt.Errorf("codex runtime: handoff state: %w", err)
	}
	return provider.Paused{Unparsed: unparsed, State: b}, nil
}

// ThreadState is the handoff state of t, one of r's threads, while r is
// paused.
func (r *Runtime) ThreadState(t provider.Thread) (json.RawMessage, error) {
	a, ok := t.(*Adapter)
	if !ok || a.rt != r {
		return nil, fmt.Errorf("codex runtime: thread %T is not one of this runtime's: %w", t, provider.ErrNoHandover)
	}
	r.mu.Lock()
	paused := r.pause != nil
	r.mu.Unlock()
	if !paused {
		return nil, fmt.Errorf("codex runtime: not paused: %w", provider.ErrNoHandover)
	}
	a.mu.Lock()
	st := a.stateLocked()
	a.mu.Unlock()
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("codex runtime: thread %s: handoff state: %w", st.ThreadID, err)
	}
	return b, nil
}

// Resume restarts a paused reader (the upgrade was abandoned).
func (r *Runtime) Resume() {
	r.mu.Lock()
	p := r.pause
	r.pause = nil
	r.mu.Unlock()
	if p == nil {
		return
	}
	if d, ok := r.o.Out.(provider.ReadDeadliner); ok {
		_ = d.SetReadDeadline(time.Time{})
	}
	close(p.resume)
}

// parkIfPaused is called by the reader on a read deadline: when a Pause
// asked for it, it hands over the unparsed bytes and waits for Resume
// (forever, when the process is replaced). false: not a pause.
func (r *Runtime) parkIfPaused(unparsed []byte) bool {
	r.mu.Lock()
	p := r.pause
	r.mu.Unlock()
	if p == nil {
		return false
	}
	p.parked <- unparsed
	<-p.resume
	return true
}

// AdoptRuntime builds a runtime over an adopted child's stdio from the
// state a previous image's Pause returned. Its reader starts (with the
// unparsed bytes) only at Start, once AdoptThread installed every thread.
// Nothing is sent to the provider.
func AdoptRuntime(o provider.RuntimeOptions, p provider.Paused) (provider.AdoptedRuntime, error) {
	var st runtimeState
	if err := json.Unmarshal(p.State, &st); err != nil {
		return nil, fmt.Errorf("codex runtime: handoff state: %w", err)
	}
	if st.V != runtimeHandoffVersion {
		return nil, fmt.Errorf("codex runtime: handoff state version %d, want %d", st.V, runtimeHandoffVersion)
	}
	o.Out = provider.NewPrefixed(p.Unparsed, o.Out)
	r := buildRuntime(o)
	r.next = st.Next
	r.handed = map[string]bool{}
	for _, th := range st.Threads {
		r.handed[th] = true
	}
	for _, th := range st.Detached {
		r.detached[th] = true
	}
	return r, nil
}

// AdoptThread installs a handed-over thread (before Start): its adapter
// is rebuilt from the state ThreadState returned and the thread's lines
// are routed to it.
func (r *Runtime) AdoptThread(o provider.Options, state json.RawMessage) (provider.Thread, error) {
	st, err := decodeState(state)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	handed := r.handed[st.ThreadID]
	delete(r.handed, st.ThreadID)
	r.mu.Unlock()
	if !handed {
		return nil, fmt.Errorf("codex runtime: thread %q was not bound on the handed-over runtime", st.ThreadID)
	}
	a := r.Thread(o).(*Adapter)
	a.install(st)
	if err := r.bind(st.ThreadID, a); err != nil {
		return nil, err
	}
	return a, nil
}

// Start starts an adopted runtime's reader. A thread handed over and not
// installed (its session was not adopted) is treated as detached.
func (r *Runtime) Start() {
	r.mu.Lock()
	for th := range r.handed {
		r.detached[th] = true
		r.log.Warn("handed-over thread not adopted; its lines are dropped", "thread_id", th)
	}
	r.handed = nil
	r.mu.Unlock()
	go r.readLoop()
}
