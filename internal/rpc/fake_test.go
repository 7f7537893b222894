package rpc

import (
	"context"
	"sync"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// fakeBackend is a tiny api.Backend: sessions in a map, hooks for the
// behaviours a test needs, and a record of ConnClosed/Detach calls.
type fakeBackend struct {
	mu           sync.Mutex
	sessions     map[string]api.SessionInfo
	closed       map[string]int
	closedCh     chan string
	detached     chan string
	holdHook     func(ctx context.Context) error
	attachHook   func(conn string, p api.AttachParams, legacy bool) (api.AttachResult, api.Subscription, error)
	panicOn      string
	onConnClosed func()

	// A model of the host's holds and session locks, for ordering tests:
	// holders per session, the order calls ran in per session, a per-session
	// lock that hold/release/send/cancel/respond take (nil map: off), a
	// simulated child start on a session's first hold, and a hook a send
	// runs while it holds the session lock.
	holders   map[string]map[string]bool
	ops       map[string][]string
	sessLocks map[string]*sync.Mutex
	startCost func()
	sendHook  func(ctx context.Context) error
	readHook  func(p api.ReadParams) api.ReadResult
	readErr   error // Read fails with it, when set
}

// lockSession takes id's modelled session lock, if locks are on.
func (f *fakeBackend) lockSession(id string) func() {
	f.mu.Lock()
	if f.sessLocks == nil {
		f.mu.Unlock()
		return func() {}
	}
	l := f.sessLocks[id]
	if l == nil {
		l = new(sync.Mutex)
		f.sessLocks[id] = l
	}
	f.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (f *fakeBackend) record(id, op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ops == nil {
		f.ops = map[string][]string{}
	}
	f.ops[id] = append(f.ops[id], op)
}

// heldBy lists the holders the model still has, "session/holder".
func (f *fakeBackend) heldBy() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for s, hs := range f.holders {
		for h := range hs {
			out = append(out, s+"/"+h)
		}
	}
	return out
}

func newFake() *fakeBackend {
	return &fakeBackend{
		sessions: map[string]api.SessionInfo{"s_aaaaaaaa": {SessionID: "s_aaaaaaaa", Provider: "echo", Cwd: "/", State: "stored"}},
		closed:   map[string]int{}, closedCh: make(chan string, 64), detached: make(chan string, 64),
	}
}

func (f *fakeBackend) Create(_ context.Context, p api.CreateParams) (api.SessionInfo, error) {
	if p.Provider != "echo" {
		return api.SessionInfo{}, api.Errorf(api.KindUnknownProvider, map[string]any{"provider": p.Provider, "known": []string{"echo"}}, "unknown provider %s", p.Provider)
	}
	if f.panicOn == "create" {
		panic("boom")
	}
	s := api.SessionInfo{SessionID: "s_bbbbbbbb", Provider: p.Provider, Cwd: p.Cwd, State: "stored"}
	f.mu.Lock()
	f.sessions[s.SessionID] = s
	f.mu.Unlock()
	return s, nil
}

func (f *fakeBackend) List(context.Context, api.ListParams) (api.ListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var r api.ListResult
	for _, s := range f.sessions {
		r.Sessions = append(r.Sessions, s)
	}
	return r, nil
}

func (f *fakeBackend) Get(_ context.Context, id string) (api.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[id]
	if !ok {
		return s, api.Errorf(api.KindSessionNotFound, nil, "session %s not found", id)
	}
	return s, nil
}

func (f *fakeBackend) Delete(context.Context, string) error { return nil }

func (f *fakeBackend) Hold(ctx context.Context, conn string, p api.HoldParams) (api.HoldResult, error) {
	defer f.lockSession(p.SessionID)()
	f.record(p.SessionID, "hold "+p.HolderID)
	if f.holdHook != nil {
		if err := f.holdHook(ctx); err != nil {
			return api.HoldResult{}, err
		}
	}
	f.mu.Lock()
	first := f.holders[p.SessionID] == nil
	f.mu.Unlock()
	if first && f.startCost != nil {
		f.startCost()
	}
	f.mu.Lock()
	if f.holders == nil {
		f.holders = map[string]map[string]bool{}
	}
	if f.holders[p.SessionID] == nil {
		f.holders[p.SessionID] = map[string]bool{}
	}
	f.holders[p.SessionID][p.HolderID] = true
	f.mu.Unlock()
	return api.HoldResult{SessionID: p.SessionID, Fence: 1, State: "live", Holders: []string{p.HolderID}}, nil
}

func (f *fakeBackend) Release(_ context.Context, _ string, p api.ReleaseParams) (api.ReleaseResult, error) {
	defer f.lockSession(p.SessionID)()
	f.record(p.SessionID, "release "+p.HolderID)
	f.mu.Lock()
	defer f.mu.Unlock()
	released := f.holders[p.SessionID][p.HolderID]
	delete(f.holders[p.SessionID], p.HolderID)
	return api.ReleaseResult{Released: released, Holders: []string{}}, nil
}

func (f *fakeBackend) Close(context.Context, string) (api.CloseResult, error) {
	return api.CloseResult{}, nil
}

func (f *fakeBackend) Attach(_ context.Context, conn string, p api.AttachParams, legacy bool) (api.AttachResult, api.Subscription, error) {
	if f.attachHook != nil {
		return f.attachHook(conn, p, legacy)
	}
	sub := &fakeSub{id: "sub-1"}
	return api.AttachResult{SubscriptionID: sub.id}, sub, nil
}

func (f *fakeBackend) Read(_ context.Context, p api.ReadParams) (api.ReadResult, error) {
	if f.readErr != nil {
		return api.ReadResult{}, f.readErr
	}
	if f.readHook != nil {
		return f.readHook(p), nil
	}
	return api.ReadResult{}, nil
}

func (f *fakeBackend) Detach(_ context.Context, _ string, id string) error {
	f.detached <- id
	return nil
}

func (f *fakeBackend) Send(ctx context.Context, p api.SendParams) (api.SendResult, error) {
	defer f.lockSession(p.SessionID)()
	f.record(p.SessionID, "send")
	if f.sendHook != nil {
		if err := f.sendHook(ctx); err != nil {
			return api.SendResult{}, err
		}
	}
	return api.SendResult{TurnID: "t_1"}, nil
}

func (f *fakeBackend) Cancel(_ context.Context, id string) (api.CancelResult, error) {
	defer f.lockSession(id)()
	f.record(id, "cancel")
	return api.CancelResult{}, nil
}

func (f *fakeBackend) Respond(_ context.Context, p api.RespondParams) error {
	defer f.lockSession(p.SessionID)()
	f.record(p.SessionID, "respond")
	return nil
}

func (f *fakeBackend) ConnClosed(conn string) {
	f.mu.Lock()
	f.closed[conn]++
	hook := f.onConnClosed
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.closedCh <- conn
}

func (f *fakeBackend) closedCount(conn string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed[conn]
}

func (f *fakeBackend) Counts() api.SessionCounts { return api.SessionCounts{Stored: 1} }
func (f *fakeBackend) Providers() []string       { return []string{"echo"} }
func (f *fakeBackend) Stats() map[string]any     { return map[string]any{"evictions": 0} }

// fakeSub delivers evs, then err (nil: block until ctx ends). Abandon
// closes abandoned, when set.
type fakeSub struct {
	id        string
	evs       []event.Event
	err       error
	i         int
	abandoned chan struct{}
}

func (s *fakeSub) ID() string { return s.id }

func (s *fakeSub) Abandon() {
	if s.abandoned != nil {
		close(s.abandoned)
	}
}

func (s *fakeSub) Next(ctx context.Context) (event.Event, error) {
	if s.i < len(s.evs) {
		s.i++
		return s.evs[s.i-1], nil
	}
	if s.err != nil {
		return event.Event{}, s.err
	}
	<-ctx.Done()
	return event.Event{}, api.ErrSubscriptionClosed
}
