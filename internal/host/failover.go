package host

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// Failover: a turn that ends failed {rate_limited} marks its account
// limited (until the provider's resetsAt, else defaultLimit); when the
// profile has a failover list the session switches to the next account
// of it that is not limited (cause rate_limited) and, only when the
// failed turn produced no item (no item.started: no command ran, no file
// changed, so nothing can run twice), sends its prompt once more as a
// new turn whose turn.started carries retryOf. With every account
// limited the turn stays failed and account.exhausted {until} is
// journaled.

// noRetryItems is account.switched's noRetry when the failed turn did
// something.
const noRetryItems = "the failed turn produced items (a command or a change may have run): its prompt is not sent again"

// failoverLocked runs the failover of e's rate-limited turn and returns
// the session's entry (locked; the caller unlocks e in any case). Needs
// the session lock.
func (h *Host) failoverLocked(ctx context.Context, e *entry, prov Provider, turnID, resetsAt string) *entry {
	cur := accountOf(e.rec, prov)
	now := h.clock.Now()
	until := now.Add(defaultLimit)
	if t, err := time.Parse(time.RFC3339, resetsAt); err == nil && t.After(now) {
		until = t
	}
	h.mu.Lock()
	h.limited[runtimeKey{profile: e.rec.Provider, account: cur}] = until
	h.mu.Unlock()
	h.log.Warn("account rate-limited", "session_id", e.id, "provider", e.rec.Provider, "account", cur, "until", until.UTC().Format(time.RFC3339))
	if len(prov.Failover) == 0 {
		return e
	}
	next, earliest := h.nextAccount(e.rec.Provider, prov.Failover, cur)
	if next == "" {
		if _, err := e.sink.Commit(ctx, event.New(event.AccountExhausted, "", event.AccountExhaustedData{
			Until: earliest.UTC().Format(time.RFC3339), TurnID: turnID})); err != nil {
			h.log.Error("journal account.exhausted", "session_id", e.id, "err", err)
		}
		h.log.Warn("every failover account is rate-limited", "session_id", e.id, "provider", e.rec.Provider, "until", earliest.UTC().Format(time.RFC3339))
		return e
	}
	text, retryOf, started, items := h.turnFacts(e.id, turnID)
	note := event.AccountSwitchData{TurnID: turnID, Retried: started && !items && retryOf == ""}
	switch {
	case items:
		note.NoRetry = noRetryItems
	case retryOf != "":
		note.NoRetry = "the failed turn already sent turn " + retryOf + "'s prompt again: it is sent once only"
	}
	out, err := h.switchLiveLocked(ctx, e, prov, next, event.SwitchCauseRateLimited, note)
	if err != nil || out.e == nil || !note.Retried {
		return out.e
	}
	if _, err := h.sendLocked(ctx, out.e, api.SendParams{SessionID: e.id, Text: text}, turnID); err != nil {
		h.log.Warn("failover: sending the rate-limited turn's prompt again failed", "session_id", e.id, "turn_id", turnID, "err", err)
	}
	return out.e
}

// nextAccount is the first account of order after cur (wrapping round)
// that is not limited, and, when there is none, the earliest time one
// of them (or cur) is no longer limited.
func (h *Host) nextAccount(profile string, order []string, cur string) (string, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	start := slices.Index(order, cur) + 1 // 0 when cur is not in the list
	var earliest time.Time
	for i := range order {
		an := order[(start+i)%len(order)]
		if an == cur {
			continue
		}
		t := h.limitedUntilMapLocked(runtimeKey{profile: profile, account: an})
		if t.IsZero() {
			return an, time.Time{}
		}
		if earliest.IsZero() || t.Before(earliest) {
			earliest = t
		}
	}
	if t := h.limitedUntilMapLocked(runtimeKey{profile: profile, account: cur}); !t.IsZero() && (earliest.IsZero() || t.Before(earliest)) {
		earliest = t
	}
	return "", earliest
}

// turnFacts reads turnID's prompt (and the turn it retried) from the
// journal and whether the provider produced any item for it.
func (h *Host) turnFacts(id, turnID string) (text, retryOf string, started, items bool) {
	var after uint64
	for {
		evs, _, more, err := h.j.Read(id, after, 512)
		if err != nil {
			h.log.Warn("failover: read the failed turn", "session_id", id, "turn_id", turnID, "err", err)
			return text, retryOf, false, true // unknown: never risk running it twice
		}
		for _, ev := range evs {
			after = ev.Seq
			if ev.TurnID != turnID {
				continue
			}
			switch ev.Type {
			case event.TurnStarted:
				var d event.TurnStartedData
				if json.Unmarshal(ev.Data, &d) == nil {
					text, retryOf, started = d.Text, d.RetryOf, true
				}
			case event.ItemStarted:
				items = true
			}
		}
		if !more || len(evs) == 0 {
			return text, retryOf, started, items
		}
	}
}
