package acp

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

// handoffState is everything the adapter knows that the agent will still
// refer to after a live upgrade: the session, the open turn with the id of
// its unanswered session/prompt (its answer ends the turn in the next
// image), the turn's open items and text, the pending permission requests
// with their ids as the agent sent them, whether a cancel is waiting for
// the turn's end, and our next request number (a new request never reuses
// one the agent saw).
type handoffState struct {
	V         int               `json:"v"`
	ThreadID  string            `json:"threadId"`
	CanLoad   bool              `json:"canLoad,omitempty"`
	NextID    int64             `json:"nextId"`
	Turn      *handoffTurn      `json:"turn,omitempty"`
	Approvals []handoffApproval `json:"approvals,omitempty"`
	ApprovalN int64             `json:"approvalN"`
	Stuck     bool              `json:"stuck,omitempty"`
	Warned    map[string]bool   `json:"warned,omitempty"`
	Garbage   int64             `json:"garbage,omitempty"`
}

type handoffTurn struct {
	Ours        string        `json:"ours"`
	PromptID    string        `json:"promptId"`
	Interrupted bool          `json:"interrupted,omitempty"`
	Denied      bool          `json:"denied,omitempty"`
	MsgN        int           `json:"msgN"`
	MsgID       string        `json:"msgId,omitempty"`
	MsgText     string        `json:"msgText,omitempty"`
	ThoughtID   string        `json:"thoughtId,omitempty"`
	ThoughtText string        `json:"thoughtText,omitempty"`
	Tools       []handoffTool `json:"tools,omitempty"`
}

type handoffTool struct {
	ID         string           `json:"id"`
	ACPKind    string           `json:"acpKind,omitempty"`
	Kind       string           `json:"kind"`
	Title      string           `json:"title,omitempty"`
	Status     string           `json:"status,omitempty"`
	RawInput   json.RawMessage  `json:"rawInput,omitempty"`
	RawOut     *string          `json:"rawOut,omitempty"`
	Exit       *int             `json:"exit,omitempty"`
	Diffs      []map[string]any `json:"diffs,omitempty"`
	ContentOut string           `json:"contentOut,omitempty"`
	Locations  []string         `json:"locations,omitempty"`
	Output     string           `json:"output,omitempty"`
	Truncated  int              `json:"truncated,omitempty"`
	Denied     bool             `json:"denied,omitempty"`
	Raw        json.RawMessage  `json:"raw,omitempty"`
}

type handoffApproval struct {
	Key        string            `json:"key"`
	RawID      json.RawMessage   `json:"rawId"`
	TurnID     string            `json:"turnId"`
	ToolCallID string            `json:"toolCallId,omitempty"`
	OptionIDs  map[string]string `json:"optionIds"`
	Options    []string          `json:"options"`
	Order      int64             `json:"order"`
}

// pauseReq is a Pause in progress: the reader parks, hands over what it
// read and not parsed, and waits for resume.
type pauseReq struct {
	parked chan []byte
	resume chan struct{}
}

// Pause stops the reader at a line boundary and returns the adapter's
// state (provider.Handover). It refuses while a request of ours other
// than the open turn's session/prompt waits for its answer.
func (a *Adapter) Pause(ctx context.Context) (provider.Paused, error) {
	d, ok := a.o.Out.(provider.ReadDeadliner)
	if !ok {
		return provider.Paused{}, fmt.Errorf("acp: stdout %T: %w", a.o.Out, provider.ErrNoHandover)
	}
	p := &pauseReq{parked: make(chan []byte, 1), resume: make(chan struct{})}
	a.mu.Lock()
	if a.pause != nil {
		a.mu.Unlock()
		return provider.Paused{}, fmt.Errorf("acp: already paused: %w", provider.ErrNoHandover)
	}
	a.pause = p
	a.mu.Unlock()
	if err := d.SetReadDeadline(time.Unix(1, 0)); err != nil { // in the past: the read in progress returns now
		a.Resume()
		return provider.Paused{}, fmt.Errorf("acp: pause stdout: %w: %w", provider.ErrNoHandover, err)
	}
	var unparsed []byte
	select {
	case unparsed = <-p.parked:
	case <-a.done:
		a.Resume()
		return provider.Paused{}, fmt.Errorf("acp: %w", provider.ErrExited)
	case <-ctx.Done():
		a.Resume()
		return provider.Paused{}, fmt.Errorf("acp: pause: %w", context.Cause(ctx))
	}
	if err := a.flushAnswers(ctx); err != nil {
		// Our answers queued before the pause are the agent's before the
		// next image reads a line: none is lost in the handover.
		a.Resume()
		return provider.Paused{}, fmt.Errorf("acp: pause: answers the agent has not read: %w: %w", provider.ErrNoHandover, err)
	}
	a.mu.Lock()
	for key, c := range a.calls {
		if c.method != "session/prompt" || a.turn == nil || a.turn.promptID != key {
			a.mu.Unlock()
			a.Resume()
			return provider.Paused{}, fmt.Errorf("acp: %s: %w", c.method, provider.ErrRequestInFlight)
		}
	}
	st := a.stateLocked()
	a.mu.Unlock()
	b, err := json.Marshal(st)
	if err != nil {
		a.Resume()
		return provider.Paused{}, fmt.Errorf("acp: handoff state: %w", err)
	}
	return provider.Paused{Unparsed: unparsed, State: b}, nil
}

// stateLocked is the handoff state. Needs mu.
func (a *Adapter) stateLocked() handoffState {
	st := handoffState{V: handoffVersion, ThreadID: a.threadID, CanLoad: a.canLoad, NextID: a.nextID, ApprovalN: a.approvalN,
		Stuck: a.stuck != nil, Warned: a.warned, Garbage: a.garbage}
	if t := a.turn; t != nil {
		ht := &handoffTurn{Ours: t.ours, PromptID: t.promptID, Interrupted: t.interrupted, Denied: t.denied, MsgN: t.msgN}
		if t.msg != nil {
			ht.MsgID, ht.MsgText = t.msg.id, t.msg.text.String()
		}
		if t.thought != nil {
			ht.ThoughtID, ht.ThoughtText = t.thought.id, t.thought.text.String()
		}
		for _, id := range t.toolOrder {
			if tl := t.tools[id]; tl != nil {
				ht.Tools = append(ht.Tools, tl.handoff())
			}
		}
		st.Turn = ht
	}
	for k, ap := range a.approvals {
		st.Approvals = append(st.Approvals, handoffApproval{Key: k, RawID: ap.rawID, TurnID: ap.turnID, ToolCallID: ap.toolCallID,
			OptionIDs: ap.optionIDs, Options: ap.options, Order: ap.order})
	}
	sort.Slice(st.Approvals, func(i, j int) bool { return st.Approvals[i].Order < st.Approvals[j].Order })
	return st
}

func (tl *tool) handoff() handoffTool {
	h := handoffTool{ID: tl.id, ACPKind: tl.acpKind, Kind: tl.kind, Title: tl.title, Status: tl.status, RawInput: tl.rawInput,
		RawOut: tl.rawOut, Exit: tl.exit, Diffs: tl.diffs, ContentOut: tl.contentOut, Output: tl.output, Truncated: tl.truncated,
		Denied: tl.denied, Raw: tl.raw}
	for _, l := range tl.locations {
		h.Locations = append(h.Locations, l.Path)
	}
	return h
}

func (h handoffTool) tool() *tool {
	tl := &tool{id: h.ID, acpKind: h.ACPKind, kind: h.Kind, title: h.Title, status: h.Status, rawInput: h.RawInput,
		rawOut: h.RawOut, exit: h.Exit, diffs: h.Diffs, contentOut: h.ContentOut, output: h.Output, truncated: h.Truncated,
		denied: h.Denied, raw: h.Raw}
	for _, p := range h.Locations {
		tl.locations = append(tl.locations, struct {
			Path string `json:"path"`
		}{p})
	}
	return tl
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

// Adopt builds an adapter over an adopted agent's stdio from the state a
// previous image's Pause returned; its reader starts with the unparsed
// bytes. Nothing is sent to the agent. The open turn's session/prompt is
// waited for under its id; a cancel sent before the upgrade gets
// InterruptTimeout afresh to end its turn. The profile (auth_method) is
// only for a start: an adopted agent is past it.
func Adopt(o provider.Options, p provider.Paused) (provider.Adapter, error) {
	var st handoffState
	if err := json.Unmarshal(p.State, &st); err != nil {
		return nil, fmt.Errorf("acp: handoff state: %w", err)
	}
	if st.V != handoffVersion {
		return nil, fmt.Errorf("acp: handoff state version %d, want %d", st.V, handoffVersion)
	}
	o.Out = provider.NewPrefixed(p.Unparsed, o.Out)
	a := newAdapter(o, Profile{})
	a.install(st)
	a.run()
	return a, nil
}

// install puts a handed-over state into a fresh adapter (its reader not
// started): the session, the open turn with its session/prompt waited for
// under its id, the pending permission requests.
func (a *Adapter) install(st handoffState) {
	a.threadID, a.canLoad, a.started, a.nextID, a.approvalN, a.garbage = st.ThreadID, st.CanLoad, true, st.NextID, st.ApprovalN, st.Garbage
	for k := range st.Warned {
		if len(a.warned) < maxNoticeKeys {
			a.warned[capText(k, 2*maxNameBytes)] = true
		}
	}
	if ht := st.Turn; ht != nil {
		t := &openTurn{ours: ht.Ours, promptID: ht.PromptID, interrupted: ht.Interrupted, denied: ht.Denied, msgN: ht.MsgN, tools: map[string]*tool{}}
		if ht.MsgID != "" {
			t.msg = &textItem{id: ht.MsgID}
			t.msg.text.WriteString(ht.MsgText)
		}
		if ht.ThoughtID != "" {
			t.thought = &thought{id: ht.ThoughtID}
			t.thought.text.WriteString(ht.ThoughtText)
		}
		for _, h := range ht.Tools {
			tl := h.tool()
			t.tools[h.ID] = tl
			t.toolOrder = append(t.toolOrder, h.ID)
			t.toolBytes += tl.size()
		}
		a.turn = t
		a.calls[ht.PromptID] = &call{method: "session/prompt", onResult: func(r json.RawMessage, rerr *RPCError) { a.endTurn(t, r, rerr) }}
		if st.Stuck {
			a.mu.Lock() // the timer's onStuck may run before this returns
			a.stuck = time.AfterFunc(a.o.InterruptTimeout, func() { a.onStuck(t) })
			a.mu.Unlock()
		}
	}
	for _, h := range st.Approvals {
		ap := &approval{rawID: h.RawID, turnID: h.TurnID, toolCallID: h.ToolCallID, optionIDs: h.OptionIDs,
			options: h.Options, order: h.Order}
		a.approvals[h.Key] = ap
		a.approvalBytes += ap.size() + len(h.Key)
	}
}
