package host

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
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
func (h *Host) failoverLocked(ctx context.Context, e *entry, prov Provider, turnID string) *entry {
	next := h.failoverTarget(ctx, e, prov, turnID)
	if next == "" {
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
	if out.busy != nil {
		ps := &store.PendingSwitch{To: next, Cause: event.SwitchCauseRateLimited}
		if note.Retried {
			ps.RetryTurn = turnID // sent again once the switch is applied
		}
		if _, qerr := h.queueBusyLocked(ctx, e, accountOf(e.rec, prov), out.busy, ps); qerr != nil {
			h.log.Error("queue the failover behind a runtime's recycle", "session_id", e.id, "err", qerr)
		}
		return e
	}
	if err != nil || out.e == nil || !note.Retried {
		return out.e
	}
	if _, err := h.sendLocked(ctx, out.e, api.SendParams{SessionID: e.id, Text: text}, turnID); err != nil {
		h.log.Warn("failover: sending the rate-limited turn's prompt again failed", "session_id", e.id, "turn_id", turnID, "err", err)
	}
	return out.e
}

// markLimited marks account k limited until resetsAt (RFC 3339; else
// defaultLimit from now), as a turn of session id reported.
func (h *Host) markLimited(id string, k runtimeKey, resetsAt string) {
	now := h.clock.Now()
	until := now.Add(defaultLimit)
	if t, err := time.Parse(time.RFC3339, resetsAt); err == nil && t.After(now) {
		until = t
	}
	h.mu.Lock()
	h.limited[k] = until
	h.mu.Unlock()
	h.log.Warn("account rate-limited", "session_id", id, "provider", k.profile, "account", k.account, "until", until.UTC().Format(time.RFC3339))
}

// failoverTarget is the account e's rate-limited turn fails over to: ""
// when the profile has no failover list, or when every account of it
// is limited (account.exhausted journaled). Needs the session lock.
func (h *Host) failoverTarget(ctx context.Context, e *entry, prov Provider, turnID string) string {
	if len(prov.Failover) == 0 {
		return ""
	}
	next, earliest := h.nextAccount(e.rec.Provider, prov.Failover, accountOf(e.rec, prov))
	if next == "" {
		if _, err := e.sink.Commit(ctx, event.New(event.AccountExhausted, "", event.AccountExhaustedData{
			Until: earliest.UTC().Format(time.RFC3339), TurnID: turnID})); err != nil {
			h.log.Error("journal account.exhausted", "session_id", e.id, "err", err)
		}
		h.log.Warn("every failover account is rate-limited", "session_id", e.id, "provider", e.rec.Provider, "until", earliest.UTC().Format(time.RFC3339))
	}
	return next
}

// queueFailoverLocked queues the failover of e's rate-limited turn when
// another turn began before it ran: the switch is applied after that
// turn, the failed prompt not sent again. Needs the session lock.
func (h *Host) queueFailoverLocked(ctx context.Context, e *entry, prov Provider, turnID string) {
	next := h.failoverTarget(ctx, e, prov, turnID)
	if next == "" {
		return
	}
	if _, err := h.queueSwitchLocked(ctx, e, accountOf(e.rec, prov), &store.PendingSwitch{To: next, Cause: event.SwitchCauseRateLimited}); err != nil {
		h.log.Error("queue the failover behind a newer turn", "session_id", e.id, "turn_id", turnID, "err", err)
	}
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
