package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// handoffVersion is the version of handoffState; Adopt refuses another.
const handoffVersion = 1

// handoffState is everything the adapter knows that the provider will
// still refer to after a live upgrade: the thread, the open turn and its
// provider id (later notifications name it), the pending approvals with
// their raw provider ids (the answer must carry the id exactly as sent),
// the item bookkeeping of the open turn, and our next request id (so a new
// request never reuses one the provider saw).
type handoffState struct {
	V         int                 `json:"v"`
	ThreadID  string              `json:"threadId"`
	NextID    int64               `json:"nextId"`
	Turn      *handoffTurn        `json:"turn,omitempty"`
	Approvals []handoffApproval   `json:"approvals,omitempty"`
	ApprovalN int64               `json:"approvalN"`
	LastEnded string              `json:"lastEnded,omitempty"`
	Output    map[string]int      `json:"output,omitempty"`
	Cut       map[string]int      `json:"cut,omitempty"`
	Usage     event.TurnUsageData `json:"usage"`
	Open      []event.ItemData    `json:"open,omitempty"`
	Warned    map[string]bool     `json:"warned,omitempty"`
}

type handoffTurn struct {
	Ours        string `json:"ours"`
	Provider    string `json:"provider,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	Failure     string `json:"failure,omitempty"`
	Limited     bool   `json:"limited,omitempty"`
}

type handoffApproval struct {
	Key     string          `json:"key"` // the requestId clients answer with
	RawID   json.RawMessage `json:"rawId"`
	TurnID  string          `json:"turnId"`
	Method  string          `json:"method"`
	Kind    string          `json:"kind"`
	Options []string        `json:"options"`
	Params  json.RawMessage `json:"params,omitempty"`
	Order   int64           `json:"order"`
}

// pauseReq is a Pause in progress: the reader parks, hands over what it
// read and not parsed, and waits for resume.
type pauseReq struct {
	parked chan []byte
	resume chan struct{}
}

// Pause stops the reader at a line boundary and returns the adapter's
// state (provider.Handover).
func (a *Adapter) Pause(ctx context.Context) (provider.Paused, error) {
	d, ok := a.o.Out.(provider.ReadDeadliner)
	if !ok {
		return provider.Paused{}, fmt.Errorf("codex: stdout %T: %w", a.o.Out, provider.ErrNoHandover)
	}
	p := &pauseReq{parked: make(chan []byte, 1), resume: make(chan struct{})}
	a.mu.Lock()
	if a.pause != nil {
		a.mu.Unlock()
		return provider.Paused{}, fmt.Errorf("codex: already paused: %w", provider.ErrNoHandover)
	}
	a.pause = p
	a.mu.Unlock()
	if err := d.SetReadDeadline(time.Unix(1, 0)); err != nil { // in the past: the read in progress returns now
		a.Resume()
		return provider.Paused{}, fmt.Errorf("codex: pause stdout: %w: %w", provider.ErrNoHandover, err)
	}
	var unparsed []byte
	select {
	case unparsed = <-p.parked:
	case <-a.done:
		a.Resume()
		return provider.Paused{}, fmt.Errorf("codex: %w", ErrExited)
	case <-ctx.Done():
		a.Resume()
		return provider.Paused{}, fmt.Errorf("codex: pause: %w", context.Cause(ctx))
	}
	a.mu.Lock()
	waiting := ""
	for _, c := range a.calls {
		waiting = c.method
	}
	if waiting != "" {
		a.mu.Unlock()
		a.Resume()
		return provider.Paused{}, fmt.Errorf("codex: %s: %w", waiting, provider.ErrRequestInFlight)
	}
	defer a.mu.Unlock()
	b, err := json.Marshal(a.stateLocked())
	if err != nil {
		return provider.Paused{}, fmt.Errorf("codex: handoff state: %w", err)
	}
	return provider.Paused{Unparsed: unparsed, State: b}, nil
}

// stateLocked is the adapter's handoff state. Needs a.mu, and a parked
// reader (nothing changes it meanwhile).
func (a *Adapter) stateLocked() handoffState {
	st := handoffState{V: handoffVersion, ThreadID: a.threadID, NextID: a.nextID, ApprovalN: a.approvalN,
		LastEnded: a.lastEnded, Output: a.items.output, Cut: a.items.cut, Usage: a.items.usage, Open: a.items.open, Warned: a.warned}
	if t := a.turn; t != nil {
		st.Turn = &handoffTurn{Ours: t.ours, Provider: t.provider, Interrupted: t.interrupted, Failure: t.failure, Limited: t.limited}
	}
	for k, ap := range a.approvals {
		st.Approvals = append(st.Approvals, handoffApproval{Key: k, RawID: ap.rawID, TurnID: ap.turnID, Method: ap.method,
			Kind: ap.kind, Options: ap.options, Params: ap.params, Order: ap.order})
	}
	return st
}

// Resume restarts a paused reader (the upgrade was abandoned).
func (a *Adapter) Resume() {
	a.mu.Lock()
	p := a.pause
	a.pause = nil
	a.mu.Unlock()
	if p == nil {
		return
	}
	if d, ok := a.o.Out.(provider.ReadDeadliner); ok {
		_ = d.SetReadDeadline(time.Time{})
	}
	close(p.resume)
}

// parkIfPaused is called by the reader on a read deadline: when a Pause
// asked for it, it hands over the unparsed bytes and waits for Resume
// (forever, when the process is replaced). false: not a pause.
func (a *Adapter) parkIfPaused(unparsed []byte) bool {
	a.mu.Lock()
	p := a.pause
	a.mu.Unlock()
	if p == nil {
		return false
	}
	p.parked <- unparsed
	<-p.resume
	return true
}

// Adopt builds an adapter over an adopted child's stdio from the state a
// previous image's Pause returned; its reader starts with the unparsed
// bytes. Nothing is sent to the provider.
func Adopt(o provider.Options, p provider.Paused) (provider.Adapter, error) {
	st, err := decodeState(p.State)
	if err != nil {
		return nil, err
	}
	o.Out = provider.NewPrefixed(p.Unparsed, o.Out)
	a := newAdapter(o)
	a.install(st)
	go a.readLoop()
	return a, nil
}

func decodeState(b json.RawMessage) (handoffState, error) {
	var st handoffState
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("codex: handoff state: %w", err)
	}
	if st.V != handoffVersion {
		return st, fmt.Errorf("codex: handoff state version %d, want %d", st.V, handoffVersion)
	}
	return st, nil
}

// install puts a handoff state into a new adapter (before its reader runs).
func (a *Adapter) install(st handoffState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.threadID, a.nextID, a.approvalN, a.lastEnded = st.ThreadID, st.NextID, st.ApprovalN, st.LastEnded
	if st.Turn != nil {
		a.turn = &openTurn{ours: st.Turn.Ours, provider: st.Turn.Provider, interrupted: st.Turn.Interrupted, failure: st.Turn.Failure, limited: st.Turn.Limited}
	}
	for _, ap := range st.Approvals {
		a.approvals[ap.Key] = &approval{rawID: ap.RawID, turnID: ap.TurnID, method: ap.Method, kind: ap.Kind,
			options: ap.Options, params: ap.Params, order: ap.Order}
	}
	if st.Output != nil {
		a.items.output = st.Output
	}
	if st.Cut != nil {
		a.items.cut = st.Cut
	}
	a.items.usage, a.items.open = st.Usage, st.Open
	if st.Warned != nil {
		a.warned = st.Warned
	}
}
