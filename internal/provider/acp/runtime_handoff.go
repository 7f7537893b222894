package acp

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

// runtimeState is what a shared ACP runtime knows beyond its threads: the
// request-id space (the next id, so a new request never reuses one the
// agent saw), whether the agent can load sessions, the sessions bound to
// a thread (each handed over with its own state, installed by
// AdoptThread) and the sessions that were detached but stay loaded in the
// agent (their late lines are dropped quietly).
type runtimeState struct {
	V        int      `json:"v"`
	Next     int64    `json:"next"`
	CanLoad  bool     `json:"canLoad,omitempty"`
	CanClose bool     `json:"canClose,omitempty"`
	Agent    string   `json:"agent,omitempty"`
	Sessions []string `json:"sessions,omitempty"`
	Detached []string `json:"detached,omitempty"`
}

var (
	_ provider.RuntimeHandover = (*Runtime)(nil)
	_ provider.AdoptedRuntime  = (*Runtime)(nil)
	_ provider.AdoptRuntime    = AdoptRuntime
)

// Pause parks the runtime's reader at a line boundary (every thread with
// it), waits until every answer the threads queued for the agent was
// written, and returns the runtime's state (provider.RuntimeHandover). It
// refuses while a request of a thread other than its open turn's
// session/prompt waits for its answer (that one is handed over: its
// answer ends the turn in the next image).
func (r *Runtime) Pause(ctx context.Context) (provider.Paused, error) {
	d, ok := r.o.Out.(provider.ReadDeadliner)
	if !ok {
		return provider.Paused{}, fmt.Errorf("acp runtime: stdout %T: %w", r.o.Out, provider.ErrNoHandover)
	}
	p := &pauseReq{parked: make(chan []byte, 1), resume: make(chan struct{})}
	r.mu.Lock()
	if r.pause != nil {
		r.mu.Unlock()
		return provider.Paused{}, fmt.Errorf("acp runtime: already paused: %w", provider.ErrNoHandover)
	}
	r.pause = p
	r.mu.Unlock()
	threads := r.threads()
	for _, a := range threads { // a cancelled turn's stuck timer waits for the next image (onStuck)
		a.mu.Lock()
		a.pause = &pauseReq{resume: make(chan struct{})}
		a.mu.Unlock()
	}
	if err := d.SetReadDeadline(time.Unix(1, 0)); err != nil { // in the past: the read in progress returns now
		r.Resume()
		return provider.Paused{}, fmt.Errorf("acp runtime: pause stdout: %w: %w", provider.ErrNoHandover, err)
	}
	var unparsed []byte
	select {
	case unparsed = <-p.parked:
	case <-r.done:
		r.Resume()
		return provider.Paused{}, fmt.Errorf("acp runtime: %w", provider.ErrExited)
	case <-ctx.Done():
		r.Resume()
		return provider.Paused{}, fmt.Errorf("acp runtime: pause: %w", context.Cause(ctx))
	}
	for _, a := range append(threads, r.control) {
		if err := a.flushAnswers(ctx); err != nil {
			r.Resume()
			return provider.Paused{}, fmt.Errorf("acp runtime: pause: answers the agent has not read: %w: %w", provider.ErrNoHandover, err)
		}
		if m := a.waiting(); m != "" {
			r.Resume()
			return provider.Paused{}, fmt.Errorf("acp runtime: %s: %w", m, provider.ErrRequestInFlight)
		}
	}
	r.mu.Lock()
	st := runtimeState{V: runtimeHandoffVersion, Next: r.next, CanLoad: r.canLoad, CanClose: r.canClose, Agent: r.agent,
		Sessions: slices.Sorted(maps.Keys(r.sessions)), Detached: slices.Sorted(maps.Keys(r.detached))}
	r.mu.Unlock()
	b, err := json.Marshal(st)
	if err != nil {
		r.Resume()
		return provider.Paused{}, fmt.Errorf("acp runtime: handoff state: %w", err)
	}
	return provider.Paused{Unparsed: unparsed, State: b}, nil
}

// waiting names a request of a's that waits for its answer and cannot be
// handed over ("": none; the open turn's session/prompt can).
func (a *Adapter) waiting() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, c := range a.calls {
		if c.method != "session/prompt" || a.turn == nil || a.turn.promptID != key {
			return c.method
		}
	}
	return ""
}

// ThreadState is the handoff state of t, one of r's threads, while r is
// paused.
func (r *Runtime) ThreadState(t provider.Thread) (json.RawMessage, error) {
	a := adapterOf(t)
	if a == nil || a.rt != r {
		return nil, fmt.Errorf("acp runtime: thread %T is not one of this runtime's: %w", t, provider.ErrNoHandover)
	}
	r.mu.Lock()
	paused := r.pause != nil
	r.mu.Unlock()
	if !paused {
		return nil, fmt.Errorf("acp runtime: not paused: %w", provider.ErrNoHandover)
	}
	a.mu.Lock()
	st := a.stateLocked()
	a.mu.Unlock()
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("acp runtime: session %s: handoff state: %w", agentName(st.ThreadID), err)
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
	for _, a := range r.threads() {
		a.Resume() // re-arms a stuck timer that fired while paused
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

// AdoptRuntime builds a runtime over an adopted agent's stdio from the
// state a previous image's Pause returned. Its reader starts (with the
// unparsed bytes) only at Start, once AdoptThread installed every thread.
// Nothing is sent to the agent: it is past initialize (and authenticate).
func AdoptRuntime(o provider.RuntimeOptions, p provider.Paused) (provider.AdoptedRuntime, error) {
	var st runtimeState
	if err := json.Unmarshal(p.State, &st); err != nil {
		return nil, fmt.Errorf("acp runtime: handoff state: %w", err)
	}
	if st.V != runtimeHandoffVersion {
		return nil, fmt.Errorf("acp runtime: handoff state version %d, want %d", st.V, runtimeHandoffVersion)
	}
	o.Out = provider.NewPrefixed(p.Unparsed, o.Out)
	r := buildRuntime(o, Profile{})
	r.next, r.canLoad, r.canClose, r.agent = st.Next, st.CanLoad, st.CanClose, st.Agent
	r.handed = map[string]bool{}
	for _, s := range st.Sessions {
		r.handed[s] = true
	}
	for _, s := range st.Detached {
		r.detached[s] = true
	}
	return r, nil
}

// AdoptThread installs a handed-over thread (before Start): its adapter
// is rebuilt from the state ThreadState returned, its session's lines are
// routed to it, and its open turn's session/prompt answer comes back to it.
func (r *Runtime) AdoptThread(o provider.Options, state json.RawMessage) (provider.Thread, error) {
	var st handoffState
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, fmt.Errorf("acp runtime: thread handoff state: %w", err)
	}
	if st.V != handoffVersion {
		return nil, fmt.Errorf("acp runtime: thread handoff state version %d, want %d", st.V, handoffVersion)
	}
	r.mu.Lock()
	handed := r.handed[st.ThreadID]
	delete(r.handed, st.ThreadID)
	r.mu.Unlock()
	if !handed {
		return nil, fmt.Errorf("acp runtime: session %q was not bound on the handed-over runtime", agentName(st.ThreadID))
	}
	th := r.Thread(o)
	a := adapterOf(th)
	a.install(st)
	if err := r.bind(st.ThreadID, a); err != nil {
		return nil, err
	}
	if t := st.Turn; t != nil {
		r.mu.Lock()
		r.owners[t.PromptID] = a
		r.mu.Unlock()
	}
	return th, nil
}

// Start starts an adopted runtime's reader. A session handed over and not
// installed (its sessiond session was not adopted) is treated as detached.
func (r *Runtime) Start() {
	r.mu.Lock()
	for s := range r.handed {
		r.detached[s] = true
		r.log.Warn("handed-over ACP session not adopted; its lines are dropped", "session_id", agentName(s))
	}
	r.handed = nil
	r.mu.Unlock()
	go r.readLoop()
}
