package rpc

import (
	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// sees reports whether events of type typ go to this connection: item
// events only to connections that negotiated agent-session.items.v1.
func (c *conn) sees(typ string) bool {
	return !event.ItemsV1(typ) || c.has(api.CapItems)
}

// visible filters a page of events down to those the connection sees, in
// place. Seqs of the rest stay as they are (they skip where the hidden
// ones stand); lastSeq and hasMore still describe the whole journal.
func (c *conn) visible(evs []event.Event) []event.Event {
	if c.has(api.CapItems) {
		return evs
	}
	out := evs[:0]
	for _, ev := range evs {
		if !event.ItemsV1(ev.Type) {
			out = append(out, ev)
		}
	}
	return out
}
