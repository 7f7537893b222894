package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/sessiond/sessiond/internal/provider"
)

// handoffVersion is the version of handoffState; Adopt refuses another.
const handoffVersion = 1

// handoffState is everything the adapter knows that the CLI will still
// refer to after a live upgrade: the conversation (and whether the CLI
// has begun it), the open turn, the
// pending can_use_tool requests with their request_ids as the CLI sent
// them (the answer must carry the id exactly), the content blocks being
// streamed (message.completed carries the whole text), the tools whose
// items are open, the denied tool uses, whether an acknowledged interrupt
// is waiting for the turn's end, and our next request number (a new
// request never reuses one the CLI saw).
type handoffState struct {
	V         int               `json:"v"`
	ThreadID  string            `json:"threadId,omitempty"`
	Begun     bool              `json:"begun,omitempty"`
	NextID    int64             `json:"nextId"`
	Turn      *handoffTurn      `json:"turn,omitempty"`
	Approvals []handoffApproval `json:"approvals,omitempty"`
	ApprovalN int64             `json:"approvalN"`
	Blocks    []handoffBlock    `json:"blocks,omitempty"`
	Tools     []handoffTool     `json:"tools,omitempty"`
	Denied    []string          `json:"denied,omitempty"`
	Stuck     bool              `json:"stuck,omitempty"`
	Warned    map[string]bool   `json:"warned,omitempty"`
}

type handoffTurn struct {
	Ours        string `json:"ours"`
	Interrupted bool   `json:"interrupted,omitempty"`
}

type handoffApproval struct {
	Key         string            `json:"key"` // the requestId clients answer with
	RawID       json.RawMessage   `json:"rawId"`
	TurnID      string            `json:"turnId"`
	Kind        string            `json:"kind"`
	Options     []string          `json:"options"`
	ToolName    string            `json:"toolName,omitempty"`
	ToolUseID   string            `json:"toolUseId,omitempty"`
	Input       json.RawMessage   `json:"input,omitempty"`
	Suggestions []json.RawMessage `json:"suggestions,omitempty"`
	Order       int64             `json:"order"`
}

type handoffBlock struct {
	Key    string `json:"key"`
	ItemID string `json:"itemId"`
	Kind   string `json:"kind"`
	Text   string `json:"text,omitempty"`
}

type handoffTool struct {
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Kind    string          `json:"kind"`
	Parent  string          `json:"parent,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	Payload map[string]any  `json:"payload,omitempty"`
}

// pauseReq is a Pause in progress: the reader parks, hands over what it
// read and not parsed, and waits for resume.
type pauseReq struct {
	parked chan []byte
	resume chan struct{}
}

// Pause stops the reader at a line boundary and returns the adapter's
// state (provider.Handover). It refuses while one of our control requests
// (an interrupt) waits for its answer.
func (a *Adapter) Pause(ctx context.Context) (provider.Paused, error) {
	d, ok := a.o.Out.(provider.ReadDeadliner)
	if !ok {
		return provider.Paused{}, fmt.Errorf("claude: stdout %T: %w", a.o.Out, provider.ErrNoHandover)
	}
	p := &pauseReq{parked: make(chan []byte, 1), resume: make(chan struct{})}
	a.mu.Lock()
	if a.pause != nil {
		a.mu.Unlock()
		return provider.Paused{}, fmt.Errorf("claude: already paused: %w", provider.ErrNoHandover)
	}
	a.pause = p
	a.mu.Unlock()
	if err := d.SetReadDeadline(time.Unix(1, 0)); err != nil { // in the past: the read in progress returns now
		a.Resume()
		return provider.Paused{}, fmt.Errorf("claude: pause stdout: %w: %w", provider.ErrNoHandover, err)
	}
	var unparsed []byte
	select {
	case unparsed = <-p.parked:
	case <-a.done:
		a.Resume()
		return provider.Paused{}, fmt.Errorf("claude: %w", provider.ErrExited)
	case <-ctx.Done():
		a.Resume()
		return provider.Paused{}, fmt.Errorf("claude: pause: %w", context.Cause(ctx))
	}
	a.mu.Lock()
	if len(a.calls) > 0 {
		a.mu.Unlock()
		a.Resume()
		return provider.Paused{}, fmt.Errorf("claude: a control request: %w", provider.ErrRequestInFlight)
	}
	st := a.stateLocked()
	a.mu.Unlock()
	b, err := json.Marshal(st)
	if err != nil {
		a.Resume()
		return provider.Paused{}, fmt.Errorf("claude: handoff state: %w", err)
	}
	return provider.Paused{Unparsed: unparsed, State: b}, nil
}

// stateLocked is the handoff state. Needs mu.
func (a *Adapter) stateLocked() handoffState {
	st := handoffState{V: handoffVersion, ThreadID: a.threadID, Begun: a.begun, NextID: a.nextID, ApprovalN: a.approvalN,
		Stuck: a.stuck != nil, Warned: a.warned}
	if t := a.turn; t != nil {
		st.Turn = &handoffTurn{Ours: t.ours, Interrupted: t.interrupted}
	}
	for k, ap := range a.approvals {
		st.Approvals = append(st.Approvals, handoffApproval{Key: k, RawID: ap.rawID, TurnID: ap.turnID, Kind: ap.kind,
			Options: ap.options, ToolName: ap.toolName, ToolUseID: ap.toolUseID, Input: ap.input,
			Suggestions: ap.suggestions, Order: ap.order})
	}
	sort.Slice(st.Approvals, func(i, j int) bool { return st.Approvals[i].Order < st.Approvals[j].Order })
	for k, b := range a.blocks {
		st.Blocks = append(st.Blocks, handoffBlock{Key: k, ItemID: b.itemID, Kind: b.kind, Text: b.text.String()})
	}
	sort.Slice(st.Blocks, func(i, j int) bool { return st.Blocks[i].Key < st.Blocks[j].Key })
	for _, tl := range a.tools {
		st.Tools = append(st.Tools, handoffTool{ID: tl.id, Name: tl.name, Kind: tl.kind, Parent: tl.parent,
			Input: tl.input, Payload: tl.payload})
	}
	sort.Slice(st.Tools, func(i, j int) bool { return st.Tools[i].ID < st.Tools[j].ID })
	for id := range a.denied {
		st.Denied = append(st.Denied, id)
	}
	sort.Strings(st.Denied)
	return st
}

// Resume restarts a paused reader (the upgrade was abandoned).
func (a *Adapter) Resume() {
	a.mu.Lock()
	p := a.pause
	a.pause = nil
	if t := a.turn; p != nil && a.stuck != nil && t != nil {
		a.stuck.Stop() // it may have fired while paused and done nothing
		a.stuck = time.AfterFunc(a.o.InterruptTimeout, func() { a.onStuck(t) })
	}
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

// Adopt builds an adapter over an adopted CLI's stdio from the state a
// previous image's Pause returned; its reader starts with the unparsed
// bytes. Nothing is sent to the CLI. An interrupt acknowledged before the
// upgrade gets InterruptTimeout afresh to end its turn.
func Adopt(o provider.Options, p provider.Paused) (provider.Adapter, error) {
	var st handoffState
	if err := json.Unmarshal(p.State, &st); err != nil {
		return nil, fmt.Errorf("claude: handoff state: %w", err)
	}
	if st.V != handoffVersion {
		return nil, fmt.Errorf("claude: handoff state version %d, want %d", st.V, handoffVersion)
	}
	o.Out = provider.NewPrefixed(p.Unparsed, o.Out)
	o.ThreadID = st.ThreadID
	a := newAdapter(o)
	a.started, a.begun, a.nextID, a.approvalN = true, st.Begun, st.NextID, st.ApprovalN
	if st.Turn != nil {
		a.turn = &openTurn{ours: st.Turn.Ours, interrupted: st.Turn.Interrupted}
	}
	for _, ap := range st.Approvals {
		a.approvals[ap.Key] = &approval{rawID: ap.RawID, turnID: ap.TurnID, kind: ap.Kind, options: ap.Options,
			toolName: ap.ToolName, toolUseID: ap.ToolUseID, input: ap.Input, suggestions: ap.Suggestions, order: ap.Order}
	}
	for _, b := range st.Blocks {
		nb := &block{itemID: b.ItemID, kind: b.Kind}
		nb.text.WriteString(b.Text)
		a.blocks[b.Key] = nb
	}
	for _, tl := range st.Tools {
		a.tools[tl.ID] = &tool{id: tl.ID, name: tl.Name, kind: tl.Kind, parent: tl.Parent, input: tl.Input, payload: tl.Payload}
	}
	for _, id := range st.Denied {
		a.denied[id] = true
	}
	if st.Warned != nil {
		a.warned = st.Warned
	}
	if t := a.turn; st.Stuck && t != nil {
		a.mu.Lock() // the timer's onStuck may run before this returns
		a.stuck = time.AfterFunc(a.o.InterruptTimeout, func() { a.onStuck(t) })
		a.mu.Unlock()
	}
	go a.readLoop()
	return a, nil
}
