package rpc

import (
	"context"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// sees reports whether events of type typ go to this connection: item
// events only to connections that negotiated agent-session.items.v1.
func (c *conn) sees(typ string) bool {
	return (!event.ItemsV1(typ) || c.has(api.CapItems)) && (!event.RuntimesV1(typ) || c.has(api.CapRuntimes)) &&
		(!event.AccountsV1(typ) || c.has(api.CapAccounts))
}

// visible filters a page of events down to those the connection sees, in
// place. Seqs of the rest stay as they are (they skip where the hidden
// ones stand); lastSeq and hasMore still describe the whole journal.
func (c *conn) visible(evs []event.Event) []event.Event {
	if c.has(api.CapItems) && c.has(api.CapRuntimes) && c.has(api.CapAccounts) {
		return evs
	}
	out := evs[:0]
	for _, ev := range evs {
		if c.sees(ev.Type) {
			out = append(out, ev)
		}
	}
	return out
}

// visiblePage filters a page and, while a filter leaves it empty although
// more follows, reads on from the page's last seq (never past upto), so a
// client that pages by the last event it got always progresses: a page is
// empty only at the journal's end (hasMore false). It returns the events
// the connection sees and whether more follow the last event scanned.
func (c *conn) visiblePage(ctx context.Context, id string, evs []event.Event, hasMore bool, upto uint64, limit int) ([]event.Event, bool, error) {
	for {
		if len(evs) == 0 {
			return evs, false, nil
		}
		last := evs[len(evs)-1].Seq
		if vis := c.visible(evs); len(vis) > 0 || !hasMore {
			return vis, hasMore, nil
		}
		r, err := c.srv.o.Backend.Read(ctx, api.ReadParams{SessionID: id, AfterSeq: last, Limit: limit})
		if err != nil {
			return nil, false, err
		}
		evs, hasMore = r.Events, r.HasMore
		for i, ev := range evs {
			if ev.Seq > upto {
				evs, hasMore = evs[:i], false
				break
			}
		}
		if len(evs) > 0 && evs[len(evs)-1].Seq == upto {
			hasMore = false
		}
	}
}
