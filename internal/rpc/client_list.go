package rpc

import (
	"context"
	"fmt"

	"github.com/sessiond/sessiond/internal/api"
)

// ListAll pages through agentSession.list (pages of the default size,
// each call passing the last one's nextCursor) and returns every stored
// session, oldest first. Sessions created while it pages may or may not be
// in it, deleted ones may be; every session that exists throughout is
// there once.
func (c *Client) ListAll(ctx context.Context) ([]api.SessionInfo, error) {
	var all []api.SessionInfo
	var p api.ListParams
	for {
		var r api.ListResult
		if err := c.Call(ctx, "agentSession.list", p, &r); err != nil {
			return nil, err
		}
		all = append(all, r.Sessions...)
		if r.NextCursor == nil {
			return all, nil
		}
		if *r.NextCursor == p.Cursor || len(r.Sessions) == 0 {
			return nil, fmt.Errorf("agentSession.list: page after cursor %q did not advance (%d sessions)", p.Cursor, len(r.Sessions))
		}
		p.Cursor = *r.NextCursor
	}
}
