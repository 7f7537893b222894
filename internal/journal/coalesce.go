package journal

import (
	"encoding/json"
	"sync/atomic"

	"github.com/sessiond/sessiond/internal/event"
)

// decodedDeltas counts the deltas whose data the coalescer decoded
// (drafts without parts): a test hook, as slowDecodes is for rows.
var decodedDeltas atomic.Uint64

// deltaKey says which deltas may merge: same type, turn, item and stream.
type deltaKey struct {
	typ, turnID, itemID, stream string
}

// coalesceKey returns a delta's text and merge key; false when its data is
// not an object with a string text (such a delta passes through
// uncoalesced).
func coalesceKey(d event.Draft) (string, deltaKey, bool) {
	if p := d.Delta; p != nil {
		return p.Text, deltaKey{typ: d.Type, turnID: d.TurnID, itemID: p.ItemID, stream: p.Stream}, true
	}
	decodedDeltas.Add(1)
	var v struct {
		Text   *string `json:"text"`
		ItemID string  `json:"itemId"`
		Stream string  `json:"stream"`
	}
	if json.Unmarshal(d.Data, &v) != nil || v.Text == nil {
		return "", deltaKey{}, false
	}
	return *v.Text, deltaKey{typ: d.Type, turnID: d.TurnID, itemID: v.ItemID, stream: v.Stream}, true
}
