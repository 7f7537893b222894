package host

import (
	"encoding/json"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
)

// cancelApprovals is the approval.resolved {cancel, by daemon} of every
// approval still open in st, in request order: journaled before the
// turn.completed of a child that exited or a daemon that restarted.
func cancelApprovals(st journal.State, reason string) []event.Draft {
	var ds []event.Draft
	for _, id := range st.PendingApprovals {
		ds = append(ds, event.New(event.ApprovalResolved, st.OpenTurn, event.ApprovalResolvedData{
			RequestID: id, Decision: "cancel", By: "daemon", Reason: reason}))
	}
	return ds
}

// interruptItems completes, interrupted, every item of the open turn that
// the journal shows started and never completed (a daemon that died
// mid-item, so no adapter closed it), in the order they started. It reads
// the turn from its turn.started; an unreadable page ends the scan with
// what was found (logged).
func (h *Host) interruptItems(id string, st journal.State) []event.Draft {
	if st.OpenTurn == "" || st.OpenTurnSeq == 0 {
		return nil
	}
	open := map[string]event.ItemData{}
	var order []string
	for after := st.OpenTurnSeq - 1; ; {
		evs, _, more, err := h.j.Read(id, after, 4096)
		if err != nil {
			h.log.Warn("cannot read the open turn for its items", "session_id", id, "after_seq", after, "err", err)
			break
		}
		for _, ev := range evs {
			after = ev.Seq
			if ev.Type != event.ItemStarted && ev.Type != event.ItemCompleted {
				continue
			}
			var d event.ItemData
			if json.Unmarshal(ev.Data, &d) != nil || d.ItemID == "" {
				continue
			}
			if ev.Type == event.ItemCompleted {
				delete(open, d.ItemID)
			} else if _, dup := open[d.ItemID]; !dup {
				open[d.ItemID] = d
				order = append(order, d.ItemID)
			}
		}
		if !more || len(evs) == 0 {
			break
		}
	}
	var ds []event.Draft
	for _, itemID := range order {
		if d, ok := open[itemID]; ok {
			ds = append(ds, event.New(event.ItemCompleted, st.OpenTurn, event.ItemData{ItemID: d.ItemID, Kind: d.Kind,
				ParentItemID: d.ParentItemID, Status: event.ItemInterruptedStatus, Payload: map[string]any{}}))
			delete(open, itemID)
		}
	}
	return ds
}
