package rpc

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/sourcegraph/jsonrpc2"
)

// The server reads its connections itself (jsonrpc2.Conn is the client's):
// messages decode as jsonrpc2 decodes them (its Request's UnmarshalJSON,
// its request/response test), except for the id: "id":null is a request
// answered with id null (JSON-RPC 2.0: only a request without an id is a
// notification), and an id that is neither a string nor an integer is
// answered -32600 invalid_request with id null instead of closing the
// connection. A response from the client is ignored as jsonrpc2 ignored
// it, and the first read error ends the connection.

// errNotMessage: neither a request nor a response (jsonrpc2's wording).
var errNotMessage = errors.New("jsonrpc2: unable to determine message type (request or response)")

// inMessage is one decoded message: a request (req), a request whose id
// is unusable (badID), or neither for a response.
type inMessage struct {
	req    *jsonrpc2.Request
	nullID bool // "id":null: answered with id null
	badID  bool // the id is not a string or an integer: answered -32600
}

// UnmarshalJSON is jsonrpc2's anyMessage test for a single message.
func (m *inMessage) UnmarshalJSON(data []byte) error {
	if req, ok := decodeSimple(data); ok { // simple.go
		m.req = req
		return nil
	}
	var probe struct {
		ID     idProbe        `json:"id"`
		Method *string        `json:"method"`
		Result explicitResult `json:"result"`
		Error  any            `json:"error"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return err
	}
	isReq := probe.Method != nil
	isResp := probe.Result.null || probe.Result.set || probe.Error != nil
	if isReq == isResp {
		return errNotMessage
	}
	if isResp {
		var r jsonrpc2.Response
		return json.Unmarshal(data, &r)
	}
	if probe.ID.bad {
		m.badID = true
		return nil
	}
	req := new(jsonrpc2.Request)
	if err := req.UnmarshalJSON(data); err != nil {
		return err
	}
	if probe.ID.null {
		req.Notif, m.nullID = false, true
	}
	m.req = req
	return nil
}

// idProbe classifies a message's id: null, or bad (not a string and not
// an integer jsonrpc2 can hold and echo as sent: true, {}, [], 1.5, -1).
type idProbe struct{ null, bad bool }

func (p *idProbe) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		p.null = true
	case b[0] == '"':
	default:
		var n json.Number
		if json.Unmarshal(b, &n) != nil {
			p.bad = true
		} else if v, err := strconv.ParseInt(n.String(), 10, 64); err != nil || v < 0 {
			p.bad = true // jsonrpc2 reads an int64 into a uint64: -1 would be echoed as 18446744073709551615
		}
	}
	return nil
}

// explicitResult tells "result":null from no result (as jsonrpc2 does).
type explicitResult struct{ null, set bool }

func (r *explicitResult) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		r.null = true
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	r.set = v != nil
	return nil
}

// readLoop is the connection's one reader, for its whole life: it reads
// and dispatches (handle never waits for a call that can wait) until a
// read fails or the stream was closed (a failed write, the outbound
// budget: requests already buffered are not run), then closes the
// stream, cancels c.ctx and closes c.done.
func (c *conn) readLoop() {
	defer close(c.done)
	for {
		var m inMessage
		if err := c.st.ReadObject(&m); err != nil || c.st.closed() {
			c.st.Close()
			c.cancel() // handlers' and pumps' ctx
			return
		}
		switch {
		case m.badID:
			c.replyBadID()
		case m.req == nil:
			c.log.Debug("jsonrpc2", "detail", "ignoring a response: the server sends no requests")
		default:
			c.handle(m.req, m.nullID)
		}
	}
}
