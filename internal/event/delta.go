package event

// DeltaParts are a delta draft's merge fields exactly as its Data holds
// them. The journal's coalescer merges deltas of the same type, turn, item
// and stream by their text; a draft built by NewMessageDelta or
// NewItemDelta carries its parts, so the coalescer reads them here instead
// of decoding Data again right after it was encoded. A draft without
// parts (built by New, or read back) is decoded as before.
type DeltaParts struct {
	Text, ItemID, Stream string
}

// NewMessageDelta builds a message.delta draft with its parts.
func NewMessageDelta(turnID string, d DeltaData) Draft {
	dr := New(MessageDelta, turnID, d)
	dr.Delta = &DeltaParts{Text: d.Text, ItemID: d.ItemID}
	return dr
}

// NewItemDelta builds an item.delta draft with its parts.
func NewItemDelta(turnID string, d ItemDeltaData) Draft {
	dr := New(ItemDelta, turnID, d)
	dr.Delta = &DeltaParts{Text: d.Text, ItemID: d.ItemID, Stream: d.Stream}
	return dr
}
