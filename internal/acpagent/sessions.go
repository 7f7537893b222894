package acpagent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// session is one ACP session the bridge holds and follows.
type session struct {
	id        string
	holdToken string

	mu         sync.Mutex
	queue      []event.Event // live events not yet translated (bounded: feed.go)
	queueBytes int
	resync     string // why the feed must catch up from the journal ("" when it need not)
	subID      string // the current subscription
	wake       chan struct{}
	lastSeq    uint64 // the last event translated
	prompt     *promptWait
	ours       map[string]bool // turn ids this bridge's prompts started
	asked      map[string]bool // approval request ids put to the editor
	done       chan struct{}
}

// promptWait is the running session/prompt: its turn, once started, and
// the stopReason (or error) its turn.completed gives.
type promptWait struct {
	cmid   string
	turnID string
	result chan turnEnd
}

type turnEnd struct {
	stop string
	err  *wireError
}

// holdParams is the bridge's hold: its holder id and a ttl, so that the
// hold of a bridge that died ends by itself.
func (b *bridge) holdParams(id string) api.HoldParams {
	ttl := holdTTL.Milliseconds()
	return api.HoldParams{SessionID: id, HolderID: b.holder, Surface: "acp", TTLMs: &ttl}
}

// renew re-holds every session every holdRenew (a repeated hold sets the
// ttl anew).
func (b *bridge) renew(ctx context.Context) {
	t := time.NewTicker(holdRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.mu.Lock()
		ids := make([]string, 0, len(b.sessions))
		for id := range b.sessions {
			ids = append(ids, id)
		}
		b.mu.Unlock()
		for _, id := range ids {
			var r api.HoldResult
			if err := b.call(ctx, "agentSession.hold", b.holdParams(id), &r); err != nil && ctx.Err() == nil {
				fmt.Fprintln(b.stderr, "sessiond acp: renew hold:", id, err)
			}
		}
	}
}

type cwdParams struct {
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
}

type createParams struct {
	Provider string `json:"provider"`
	Cwd      string `json:"cwd"`
	Account  string `json:"account,omitempty"`
}

func (b *bridge) defaultProvider(ctx context.Context) string {
	if b.f.provider != "" {
		return b.f.provider
	}
	b.mu.Lock()
	p := b.provider
	b.mu.Unlock()
	if p != "" {
		return p
	}
	var st struct {
		Providers []string `json:"providers"`
	}
	p = "echo"
	if b.call(ctx, "daemon.status", nil, &st) == nil {
		for _, n := range st.Providers {
			if n != "echo" {
				p = n
				break
			}
		}
	}
	b.mu.Lock()
	b.provider = p
	b.mu.Unlock()
	return p
}

func (b *bridge) newSession(ctx context.Context, params json.RawMessage) (any, *wireError) {
	var p cwdParams
	if err := json.Unmarshal(params, &p); err != nil || p.Cwd == "" {
		return nil, &wireError{Code: codeInvalidParams, Message: "session/new needs cwd"}
	}
	if b.f.account != "" {
		c, err := b.d.client(ctx)
		if err != nil {
			return nil, fromDaemon(err)
		}
		if !slices.Contains(c.Init.Capabilities, capAccounts) {
			return nil, &wireError{Code: codeInvalidParams,
				Message: fmt.Sprintf("--account %s: accounts are not supported by this daemon (it does not offer %s); start sessiond acp without --account", strconv.Quote(b.f.account), capAccounts),
				Data:    map[string]any{"reason": "invalid_params", "field": "account"}}
		}
	}
	var info api.SessionInfo
	cp := createParams{Provider: b.defaultProvider(ctx), Cwd: p.Cwd, Account: b.f.account}
	if err := b.call(ctx, "agentSession.create", cp, &info); err != nil {
		return nil, fromDaemon(err)
	}
	if _, err := b.open(ctx, info.SessionID); err != nil {
		return nil, err
	}
	return map[string]any{"sessionId": info.SessionID}, nil
}

func (b *bridge) loadSession(ctx context.Context, params json.RawMessage) (any, *wireError) {
	var p cwdParams
	if err := json.Unmarshal(params, &p); err != nil || p.SessionID == "" {
		return nil, &wireError{Code: codeInvalidParams, Message: "session/load needs sessionId"}
	}
	b.mu.Lock()
	_, open := b.sessions[p.SessionID]
	b.mu.Unlock()
	if open {
		return nil, &wireError{Code: codeInvalidParams, Message: "session " + p.SessionID + " is already open on this connection"}
	}
	if _, err := b.open(ctx, p.SessionID); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// open holds the session, attaches, replays its journal as session/update
// (nothing for a new one but its creation, which says nothing) and then
// follows it live. The replay and the live events meet at lastSeq: no
// event twice, none missed.
func (b *bridge) open(ctx context.Context, id string) (*session, *wireError) {
	var h api.HoldResult
	if err := b.call(ctx, "agentSession.hold", b.holdParams(id), &h); err != nil {
		return nil, fromDaemon(err)
	}
	s := &session{id: id, holdToken: h.HoldToken, wake: make(chan struct{}, 1), done: make(chan struct{}),
		ours: map[string]bool{}, asked: map[string]bool{}}
	b.mu.Lock()
	b.sessions[id] = s
	b.mu.Unlock()
	if err := b.catchUp(ctx, s); err != nil {
		b.drop(s)
		return nil, err
	}
	b.wg.Add(1)
	go b.follow(ctx, s)
	return s, nil
}

// drop forgets a session (its hold ends with the release the caller makes,
// or the ttl).
func (b *bridge) drop(s *session) {
	b.mu.Lock()
	if b.sessions[s.id] == s {
		delete(b.sessions, s.id)
		close(s.done)
	}
	b.mu.Unlock()
}

func (b *bridge) closeSession(ctx context.Context, params json.RawMessage) (any, *wireError) {
	var p cwdParams
	if err := json.Unmarshal(params, &p); err != nil || p.SessionID == "" {
		return nil, &wireError{Code: codeInvalidParams, Message: "session/close needs sessionId"}
	}
	s := b.lookup(p.SessionID)
	if s == nil {
		return nil, unknownSession(p.SessionID)
	}
	b.drop(s)
	var r api.ReleaseResult
	if err := b.call(ctx, "agentSession.release", api.ReleaseParams{SessionID: s.id, HolderID: b.holder, HoldToken: s.holdToken}, &r); err != nil {
		return nil, fromDaemon(err)
	}
	return struct{}{}, nil
}

func (b *bridge) lookup(id string) *session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[id]
}

func unknownSession(id string) *wireError {
	return &wireError{Code: codeInvalidParams, Message: "unknown session " + strconv.Quote(id) + " (session/new or session/load it first)"}
}

func (b *bridge) list(ctx context.Context, params json.RawMessage) (any, *wireError) {
	var p cwdParams
	if len(params) > 0 {
		json.Unmarshal(params, &p)
	}
	c, err := b.d.client(ctx)
	if err != nil {
		return nil, fromDaemon(err)
	}
	all, err := c.ListAll(ctx)
	if err != nil {
		return nil, fromDaemon(err)
	}
	prov := b.defaultProvider(ctx)
	out := []map[string]any{}
	for _, si := range all {
		if si.Provider != prov || (p.Cwd != "" && si.Cwd != p.Cwd) {
			continue
		}
		m := map[string]any{"sessionId": si.SessionID, "cwd": si.Cwd}
		if si.Title != "" {
			m["title"] = si.Title
		}
		at := si.CreatedAt
		if si.LastActivityAt != nil {
			at = *si.LastActivityAt
		}
		m["updatedAt"] = at.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		out = append(out, m)
	}
	return map[string]any{"sessions": out}, nil
}
