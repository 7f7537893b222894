package rpc

import (
	"context"
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/sessiond/sessiond/internal/api"
)

// agentSession.list answers one page of the stored sessions (at most
// api.MaxListSessions; 4096 sessions with 4 KiB titles are about 18 MB):
// the records, then the reply. At most
// listBuilders such replies are built at once, server-wide; a list call
// past that waits (on its connection's reading goroutine: that connection
// reads nothing meanwhile) until one is counted in the outbound budget
// (outbound.go), which sheds the slowest reader when unwritten replies
// pass max_outbound_bytes. So what lists hold is at most
// listBuilders × (records + reply) being built, plus the budget.
const listBuilders = 2

// hList builds and encodes the reply under the server's list gate; the
// gate is let go once the reply is counted in the budget (or dropped).
func hList(ctx context.Context, c *conn, params json.RawMessage) (any, error) {
	var p api.ListParams
	if err := decodeValid(params, &p); err != nil {
		return nil, err
	}
	select {
	case c.srv.listGate <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.st.closedCh:
		return nil, jsonrpc2.ErrClosed
	}
	release := func() { <-c.srv.listGate }
	r, err := c.srv.o.Backend.List(ctx, p)
	if err != nil {
		release()
		return nil, err
	}
	raw, err := encodeList(r)
	if err != nil {
		release()
		return nil, err
	}
	raw.release = release
	return raw, nil
}

// encodeList encodes {"sessions":[…],"nextCursor":…} once, straight into
// the reply's buffer (one session at a time: no second copy of the whole
// list).
func encodeList(r api.ListResult) (rawResult, error) {
	next, err := json.Marshal(r.NextCursor)
	if err != nil {
		return rawResult{}, err
	}
	var b []byte
	for i := range r.Sessions {
		s, err := json.Marshal(&r.Sessions[i])
		if err != nil {
			return rawResult{}, err
		}
		if b == nil {
			b = newRaw(len(s)*len(r.Sessions) + len(r.Sessions) + 32 + len(next))
			b = append(b, `{"sessions":[`...)
		} else {
			b = append(b, ',')
		}
		b = append(b, s...)
	}
	if b == nil {
		b = append(newRaw(32+len(next)), `{"sessions":[`...)
	}
	b = append(append(append(b, `],"nextCursor":`...), next...), '}')
	return rawResult{buf: b, off: rawHead}, nil
}
