package host

import (
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
