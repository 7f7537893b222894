package acp

import (
	"context"
	"fmt"
	"log/slog"
	"math/bits"
	"strconv"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// What the adapter remembers about an agent's oddities is bounded, however
// many distinct names the agent makes up (method names, update kinds,
// content types are the agent's to choose):
//   - a name is cut to maxNameBytes, control characters escaped, wherever
//     it is shown (notices, log lines, our answers) or kept (keys);
//   - at most maxNoticeKeys distinct notices are journaled per process; the
//     first one past it journals one summarising provider.notice
//     (notices_capped), later new ones are only counted;
//   - log lines are kept per kind for at most maxLogKinds kinds (the rest
//     share one), and each kind is rate-limited: its 1st, 2nd, 4th, 8th …
//     occurrence is logged, or the next one once logEvery passed since its
//     last line, each carrying the count and how many were suppressed.

// maxNameBytes is the longest agent-chosen name shown or kept as is.
const maxNameBytes = 128

// maxNoticeKeys bounds the distinct provider.notice keys remembered.
const maxNoticeKeys = 256

// maxLogKinds bounds the distinct anomaly kinds logged on their own.
const maxLogKinds = 256

// logEvery is how often a kind still occurring is logged at least.
const logEvery = time.Minute

// overflowKind is the log kind every kind past maxLogKinds shares.
const overflowKind = "other_kinds_over_cap"

// logRate is one anomaly kind's count and when it was last logged.
type logRate struct {
	n      int64     // occurrences
	logged int64     // occurrences when it was last logged
	at     time.Time // when it was last logged
}

// agentName is s, an agent-chosen name, as shown and kept: at most
// maxNameBytes of valid UTF-8, control characters escaped.
func agentName(s string) string {
	s = capText(s, maxNameBytes)
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			q := strconv.Quote(s)
			return capText(q[1:len(q)-1], 2*maxNameBytes)
		}
	}
	return s
}

// anomaly logs a protocol oddity, rate-limited per kind (the first of a
// kind at warn level, later ones at debug), so a misbehaving agent cannot
// flood the log.
func (a *Adapter) anomaly(kind string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.anomalyLocked(kind, args...)
}

// anomalyLocked is anomaly with mu held.
func (a *Adapter) anomalyLocked(kind string, args ...any) {
	kind = agentName(kind)
	r := a.logs[kind]
	if r == nil {
		if len(a.logs) >= maxLogKinds {
			args = append([]any{"first_kind_over_cap", kind}, args...)
			kind = overflowKind
			r = a.logs[kind]
		}
		if r == nil {
			r = &logRate{}
			a.logs[kind] = r
		}
	}
	r.n++
	now := a.now()
	if r.n > 1 && bits.OnesCount64(uint64(r.n)) != 1 && now.Sub(r.at) < logEvery {
		return
	}
	lvl := slog.LevelDebug
	if r.n == 1 {
		lvl = slog.LevelWarn
	} else {
		args = append(args, "count", r.n, "suppressed", r.n-r.logged-1)
	}
	r.logged, r.at = r.n, now
	a.log.Log(context.Background(), lvl, "provider protocol anomaly", append([]any{"kind", kind}, args...)...)
}

// firstNoticeLocked reports whether the notice keyed key is the first of
// its key in this process (and remembers it); past maxNoticeKeys it is
// not, and the first such key returns the one summarising notice to
// journal instead. Needs mu.
func (a *Adapter) firstNoticeLocked(key, turnID string) (first bool, summary *event.Draft) {
	key = capText(key, 2*maxNameBytes)
	if a.warned[key] {
		return false, nil
	}
	if len(a.warned) < maxNoticeKeys {
		a.warned[key] = true
		return true, nil
	}
	a.noticesOver++
	a.anomalyLocked("notices_capped", "max_kinds", maxNoticeKeys, "over", a.noticesOver)
	if a.noticesOver > 1 {
		return false, nil
	}
	d := event.New(event.ProviderNotice, turnID, event.NoticeData{Level: "warning", Code: "notices_capped",
		Message: fmt.Sprintf("the agent sent more than %d distinct kinds of notice (unknown methods, update kinds …); "+
			"new ones are no longer journaled, only counted in the log", maxNoticeKeys)})
	return false, &d
}

// noticeOnce journals a provider.notice (in the open turn, if any) the
// first time key is seen in this process (firstNoticeLocked).
func (a *Adapter) noticeOnce(key, level, code, msg string) {
	turnID := a.turnID()
	a.mu.Lock()
	first, summary := a.firstNoticeLocked(key, turnID)
	a.mu.Unlock()
	switch {
	case first:
		a.emit(event.New(event.ProviderNotice, turnID, event.NoticeData{Level: level, Message: capText(msg, 4096), Code: code}))
	case summary != nil:
		a.emit(*summary)
	}
}
