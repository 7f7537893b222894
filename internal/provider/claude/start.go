package claude

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// ResumeArgs is what the command line gains for a session that has a
// thread: the CLI resumes that conversation (same session_id).
func ResumeArgs(threadID string) []string { return []string{"--resume", threadID} }

// FreshThread mints a fresh conversation's session id (a random UUID; or
// reuse, one minted earlier) and the arguments that give it to the CLI:
// `--session-id ID`, which the CLI reports in its system/init. The session
// has its thread id at the hold, before any turn. The CLI writes the
// conversation only with its first turn: until then a resume of it is
// "No conversation found", and the host starts it afresh under the same id
// (store.Record.ThreadFresh).
func FreshThread(reuse string) (string, []string, error) {
	if reuse != "" {
		return reuse, []string{"--session-id", reuse}, nil
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, fmt.Errorf("claude: session id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	h := hex.EncodeToString(b[:])
	id := h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	return id, []string{"--session-id", id}, nil
}

// Start asks the CLI to initialize (a control_request) and waits for its
// answer: the CLI is up and reading. A resume (Options.ThreadID, passed on
// the command line as --resume) keeps that thread; a CLI that no longer
// has the conversation answers with an error result ("No conversation
// found …") and exits: that is ErrThreadNotFound, and the host starts a
// fresh process. Any other failure fails Start and keeps the old id. A
// fresh conversation has the id the daemon minted (Options.FreshThreadID,
// passed as --session-id); without one, its session_id comes with its
// first turn's system/init: Options.OnThreadID is told then.
func (a *Adapter) Start(ctx context.Context) (provider.StartResult, error) {
	var res provider.StartResult
	// initialize waits until the start's deadline: the whole start_timeout.
	_, err := a.control(ctx, provider.HandshakeWithin(ctx, a.o.RequestTimeout), map[string]any{"subtype": "initialize"})
	if err != nil {
		select {
		case msg := <-a.startErr:
			if old := a.o.ThreadID; old != "" && strings.Contains(strings.ToLower(msg), "no conversation found") {
				return res, &provider.NotFoundError{ThreadID: old, Cause: msg}
			}
			return res, fmt.Errorf("start: %s: %w", msg, err)
		default:
		}
		if a.o.ThreadID != "" {
			return res, fmt.Errorf("resume thread %s: %w", a.o.ThreadID, err)
		}
		return res, fmt.Errorf("start: %w", err)
	}
	a.mu.Lock()
	a.started = true
	a.mu.Unlock()
	res.ThreadID, res.Resumed = a.ThreadID(), a.o.ThreadID != ""
	if r := a.o.Replaces; r != nil && a.o.ThreadID == "" {
		// The old conversation is gone now, whether or not a turn ever
		// follows: journaled here, before provider.started, as for codex.
		// The new id is the minted one; without it, it comes with the
		// first turn's init (OnThreadID) and is empty here.
		d := *r
		d.NewThreadID = a.o.FreshThreadID
		res.Replaced = &d
		a.emit(event.New(event.ProviderThreadReplace, "", d))
	}
	return res, nil
}

// onSystem handles `system` messages: init names the conversation; the
// rest are mapped, ignored or notices by subtype (tables.go).
func (a *Adapter) onSystem(m *inbound, line []byte) {
	switch m.Subtype {
	case "init":
		a.onInit(m.SessionID)
		return
	case "compact_boundary":
		if t := a.turnID(); t != "" {
			id := "compact_" + m.SessionID
			if raw := rawOf(line); raw != nil {
				a.emit(event.New(event.ItemStarted, t, event.ItemData{ItemID: id, Kind: event.KindCompaction, Payload: map[string]any{}}))
				a.emit(event.New(event.ItemCompleted, t, event.ItemData{ItemID: id, Kind: event.KindCompaction,
					Status: event.ItemCompletedStatus, Payload: map[string]any{}, Raw: raw}))
			}
		}
		return
	case "api_retry":
		var r struct {
			Attempt    int    `json:"attempt"`
			MaxRetries int    `json:"max_retries"`
			Error      string `json:"error"`
		}
		_ = json.Unmarshal(line, &r)
		a.notice("warning", "retrying", fmt.Sprintf("model request failed, retrying (attempt %d of %d): %s", r.Attempt, r.MaxRetries, r.Error))
		return
	}
	if _, ok := systemIgnored[m.Subtype]; ok {
		return
	}
	if lvl, ok := systemNotices[m.Subtype]; ok {
		a.notice(lvl, "system_"+m.Subtype, noticeText(line))
		return
	}
	a.anomaly("unknown_system_subtype", "subtype", capText(m.Subtype, 60))
	a.noticeOnce("system:"+m.Subtype, "info", "unknown_message", "provider sent an unknown system message "+capText(m.Subtype, 100))
}

// onInit records the conversation's session_id: a fresh one is reported
// to OnThreadID, and so is the minted one the first time an init names it
// (the CLI has begun it); one that differs from the id already known (a
// resume the CLI continued under another id) is reported too and
// journaled as provider.thread_replaced, so the thread never moves
// silently.
func (a *Adapter) onInit(id string) {
	if id == "" {
		a.anomaly("init_without_session_id")
		return
	}
	if !validSessionID(id) {
		// It would go back to the CLI as `--resume ID`: an id that could
		// not (too long for argv, or read as a flag) is never recorded.
		a.anomaly("bad_session_id", "session_id", capText(id, 60))
		return
	}
	a.mu.Lock()
	old, begun := a.threadID, a.begun
	a.threadID, a.begun = id, true
	a.mu.Unlock()
	if old == id {
		if !begun && a.o.OnThreadID != nil {
			a.o.OnThreadID(id) // the minted conversation now exists: the next start resumes it
		}
		return
	}
	if old != "" {
		a.anomaly("session_id_changed", "old", old, "new", id)
		a.emit(event.New(event.ProviderThreadReplace, "", event.ThreadReplacedData{OldThreadID: old, NewThreadID: id,
			Cause: "the provider continued under another session_id"}))
	}
	if a.o.OnThreadID != nil {
		a.o.OnThreadID(id)
	}
}

// onStartResult: a result before Start succeeded is the CLI refusing to
// start (a failed resume); Start reads it.
func (a *Adapter) onStartResult(errs []string, subtype string) bool {
	a.mu.Lock()
	started := a.started
	a.mu.Unlock()
	if started {
		return false
	}
	msg := strings.Join(errs, "; ")
	if msg == "" {
		msg = subtype
	}
	select {
	case a.startErr <- msg:
	default:
	}
	return true
}

// maxSessionIDBytes bounds a Claude session id (a UUID in practice).
const maxSessionIDBytes = 256

// validSessionID: a session id the daemon may pass back as `--resume ID`:
// at most maxSessionIDBytes of letters, digits, '-', '_' and '.', not
// starting with '-'.
func validSessionID(id string) bool {
	if len(id) > maxSessionIDBytes || id[0] == '-' {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
