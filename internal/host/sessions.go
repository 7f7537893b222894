package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/store"
)

// record reads a stored session, translating absence to session_not_found.
// Request fields (the id's shape included) were checked by the caller at
// the RPC edge (api's Validate methods); the host does not check them again.
func (h *Host) record(id string) (store.Record, error) {
	r, err := h.st.GetRecord(id)
	return r, recordError(id, err)
}

// exists answers what record would, without the record: the existence
// check of the calls that only need to know (store.CheckRecord).
func (h *Host) exists(id string) error {
	return recordError(id, h.st.CheckRecord(id))
}

// recordError translates a store read's error for session id.
func recordError(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &api.Error{Kind: api.KindSessionNotFound, Msg: "session " + id + " not found",
			Data: map[string]any{"sessionId": id}}
	}
	if isDamaged(err) {
		return damagedError(id, err)
	}
	if err != nil {
		return fmt.Errorf("session %s: %w", id, err)
	}
	return nil
}

// Create stores a new session record; no child starts.
func (h *Host) Create(ctx context.Context, p api.CreateParams) (api.SessionInfo, error) {
	prov, ok := h.o.Providers[p.Provider]
	if !ok {
		known := h.Providers()
		return api.SessionInfo{}, &api.Error{Kind: api.KindUnknownProvider,
			Msg: fmt.Sprintf("unknown provider %s (known: %s): %s", api.Quote(p.Provider), strings.Join(known, ", "),
				config.ProviderFix(p.Provider)),
			Data: map[string]any{"provider": api.Prefix(p.Provider), "known": known}}
	}
	account := p.Account
	if account == "" {
		account = defaultAccount
	}
	if !prov.hasAccount(account) {
		return api.SessionInfo{}, unknownAccount(prov, account)
	}
	rec := store.Record{
		ID:        newID("s_"),
		Provider:  p.Provider,
		Cwd:       filepath.Clean(p.Cwd),
		Title:     p.Title,
		CreatedAt: h.clock.Now().UTC(),
		Account:   account,
		Env:       prov.accountEnv(account), // pinned: a resume runs under this account
		Options:   p.Options,
	}
	// The journal's session.created first, the record last: the record is
	// what makes the session exist (get, list, hold), so a create whose
	// writes the store refuses (a full disk) leaves no session behind. A
	// journal whose record never came is invisible, and removed at once
	// if the store takes that.
	if _, err := h.j.Append(ctx, rec.ID, event.New(event.SessionCreated, "", map[string]any{
		"provider": rec.Provider, "cwd": rec.Cwd, "title": rec.Title})); err != nil {
		return api.SessionInfo{}, fmt.Errorf("session %s: journal: %w", rec.ID, err)
	}
	if err := h.st.PutRecord(rec); err != nil {
		if derr := h.j.Delete(rec.ID); derr != nil {
			h.log.Warn("create failed: its journal is left without a record (never listed)", "session_id", rec.ID, "err", derr)
		}
		return api.SessionInfo{}, fmt.Errorf("session %s: %w", rec.ID, err)
	}
	h.log.Info("session created", "session_id", rec.ID, "provider", rec.Provider, "cwd", rec.Cwd)
	return h.info(rec), nil
}

// Get returns one session.
func (h *Host) Get(ctx context.Context, id string) (api.SessionInfo, error) {
	r, err := h.record(id)
	if err != nil {
		return api.SessionInfo{}, err
	}
	return h.info(r), nil
}

// List returns one page of the stored sessions, oldest first (created
// time, then id): at most p.Limit (0: api.DefaultListSessions) after
// p.Cursor (listcursor.go).
func (h *Host) List(ctx context.Context, p api.ListParams) (api.ListResult, error) {
	var after *listKey
	if p.Cursor != "" {
		k, err := decodeCursor(h.st.CursorKey, h.st.StateID, p.Cursor)
		if err != nil {
			return api.ListResult{}, err
		}
		after = &k
	}
	limit := p.Limit
	if limit == 0 {
		limit = api.DefaultListSessions
	}
	recs, err := h.st.ListRecords(func(id string, err error) {
		h.log.Error("session record unreadable; skipped", "session_id", id, "err", err)
	})
	if err != nil {
		return api.ListResult{}, err
	}
	sort.Slice(recs, func(i, k int) bool { return keyOf(recs[i]).less(keyOf(recs[k])) })
	page, next := listPage(recs, after, limit, h.st.CursorKey, h.st.StateID)
	out := api.ListResult{Sessions: make([]api.SessionInfo, 0, len(page)), NextCursor: next}
	for _, r := range page {
		out.Sessions = append(out.Sessions, h.info(r))
	}
	return out, nil
}

// Delete removes a stored session's record, lease and journal. Refused while
// the session is live, held or subscribed.
func (h *Host) Delete(ctx context.Context, id string) error {
	if _, err := h.record(id); err != nil && !errors.Is(err, api.ErrSessionDamaged) {
		return err // a damaged session is deleted all the same: doctor's fix
	}
	h.mu.Lock()
	if e := h.sessions[id]; e != nil {
		h.mu.Unlock()
		return &api.Error{Kind: api.KindInvalidState, Msg: "session " + id + " is " + e.state.String() + ": close it first"}
	}
	for _, s := range h.subs {
		if s.session == id {
			h.mu.Unlock()
			return &api.Error{Kind: api.KindInvalidState, Msg: "session " + id + " has subscribers: detach them first"}
		}
	}
	// A placeholder entry keeps a concurrent hold out while we delete.
	e := newEntry(id, StateEvicting)
	h.sessions[id] = e
	e.mu.Lock()
	h.mu.Unlock()
	defer e.mu.Unlock()
	defer h.forgetLocked(e)

	// A lease that no longer decodes is deleted with the session: no child
	// of this daemon runs for it (no entry), and startup reaps by tag.
	if rec, err := h.leases.Get(id); err == nil && rec.Status != lease.Released {
		return &api.Error{Kind: api.KindInvalidState, Msg: "session " + id + " lease is " + rec.Status.String()}
	}
	if err := h.st.DeleteRecord(id); err != nil {
		return fmt.Errorf("session %s: delete record: %w", id, err)
	}
	if err := h.j.Delete(id); err != nil {
		return fmt.Errorf("session %s: delete journal: %w", id, err)
	}
	if err := h.leases.Delete(id); err != nil {
		return fmt.Errorf("session %s: delete lease: %w", id, err)
	}
	h.log.Info("session deleted", "session_id", id)
	return nil
}

// info builds the wire view of a record merged with its live state.
func (h *Host) info(r store.Record) api.SessionInfo {
	si := api.SessionInfo{
		SessionID: r.ID, Provider: r.Provider, Cwd: r.Cwd, Title: r.Title,
		CreatedAt: r.CreatedAt, State: StateStored.String(), ThreadID: r.ThreadID,
		Holders: []string{}, Lease: lease.Released.String(),
	}
	if lr, err := h.leases.Get(r.ID); err == nil {
		si.Fence = lr.Fence
		si.Lease = lr.Status.String()
	}
	js := h.j.State(r.ID)
	si.LastSeq = js.LastSeq
	si.TurnRunning = js.OpenTurn != ""
	if js.LastSeq > 0 {
		if evs, _, _, err := h.j.Read(r.ID, js.LastSeq-1, 1); err == nil && len(evs) == 1 {
			at := evs[0].At // not &evs[0].At: that keeps the read's 64 KiB arena alive with the list
			si.LastActivityAt = &at
		}
	}
	if len(r.LastExit) > 0 {
		var ex api.ExitInfo
		if json.Unmarshal(r.LastExit, &ex) == nil {
			si.LastExit = &ex
		}
	}
	if prov, ok := h.o.Providers[r.Provider]; ok {
		si.Account = accountOf(r, prov)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.sessions[r.ID]; e != nil && !e.gone {
		si.State = e.state.String()
		if e.state == StateExited {
			si.State = StateEvicting.String()
		}
		si.PID = e.pid
		si.Cgroup = e.cgroup
		if e.rt != nil {
			si.RuntimeID, si.Account = e.rt.id, e.rt.key.account
		}
		if e.threadID != "" {
			si.ThreadID = e.threadID
		}
		for hid := range e.holds {
			si.Holders = append(si.Holders, hid)
		}
		sort.Strings(si.Holders)
		si.ReleaseAt = e.releaseAt
	}
	for _, s := range h.subs {
		if s.session == r.ID {
			si.Subscribers++
		}
	}
	return si
}

// Counts is daemon.status's session counts.
func (h *Host) Counts() api.SessionCounts {
	var c api.SessionCounts
	if n, err := h.st.CountRecords(); err == nil {
		c.Stored = n
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.sessions {
		if e.state == StateLive {
			c.Live++
		}
	}
	return c
}
