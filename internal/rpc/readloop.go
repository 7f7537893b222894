package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/sessiond/sessiond/internal/api"
)

// The server reads its connections itself, into its own message types
// (message.go; jsonrpc2.Conn is the client's). A request is decoded as
// sourcegraph/jsonrpc2 decoded it (members by exact name, the last of a
// repeated one), its params kept as sent, except where JSON-RPC 2.0 asks
// for an answer: "id":null is a request answered with id null (only a
// request without an id is a notification); an id that is neither a
// string nor an integer, and a message that is valid JSON but no request
// (not an object, a method that is not a string, neither a method nor a
// result/error) are answered -32600 invalid_request with id null, and the
// connection goes on. A response from the client is ignored as jsonrpc2
// ignored it (one it could not decode ends the connection, as there);
// malformed JSON and the first read error end the connection.

// inMessage is one decoded message: a request (req), a request whose id
// is unusable (badID), valid JSON that is no request (invalid, why), or
// neither for a response.
type inMessage struct {
	req     *request
	nullID  bool   // "id":null: answered with id null
	badID   bool   // the id is not a string or an integer: answered -32600
	invalid string // why valid JSON is no request: answered -32600
}

// UnmarshalJSON tells a request from a response as jsonrpc2's anyMessage
// test did, for a single message.
// Malformed JSON is an error (the connection ends).
func (m *inMessage) UnmarshalJSON(data []byte) error {
	if req, ok := decodeSimple(data); ok { // simple.go
		m.req = req
		return nil
	}
	if b := bytes.TrimLeft(data, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		if !json.Valid(data) {
			var v any
			return json.Unmarshal(data, &v) // its syntax error
		}
		m.invalid = "a request must be a JSON object"
		return nil
	}
	var probe struct {
		ID     idProbe         `json:"id"`
		Method json.RawMessage `json:"method"`
		Result explicitResult  `json:"result"`
		Error  any             `json:"error"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		if _, syntax := errors.AsType[*json.SyntaxError](err); syntax || !json.Valid(data) {
			return err
		}
		m.invalid = "not a JSON-RPC message: " + api.Prefix(err.Error())
		return nil
	}
	isReq := probe.Method != nil
	isResp := probe.Result.null || probe.Result.set || probe.Error != nil
	switch {
	case isReq && isResp:
		m.invalid = "a message cannot have both a method and a result or error"
		return nil
	case !isReq && !isResp:
		m.invalid = "a request needs a method"
		return nil
	case isResp:
		var r response
		return json.Unmarshal(data, &r)
	}
	if probe.ID.bad {
		m.badID = true
		return nil
	}
	var name string
	if json.Unmarshal(probe.Method, &name) != nil {
		m.invalid = "method must be a string"
		return nil
	}
	req, err := decodeRequest(data)
	if err != nil {
		m.invalid = "not a JSON-RPC request: " + api.Prefix(err.Error())
		return nil
	}
	if probe.ID.null {
		req.Notif, m.nullID = false, true
	}
	m.req = req
	return nil
}

// idProbe classifies a message's id: null, or bad (not a string and not
// an integer from 0 to 2^63-1, which an id holds and echoes as sent:
// true, {}, [], 1.5, -1).
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
			p.bad = true // jsonrpc2 read an int64 into a uint64: -1 was echoed as 18446744073709551615
		}
	}
	return nil
}

// explicitResult tells "result":null from no result (as jsonrpc2 did).
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
		case m.invalid != "":
			c.replyInvalid(m.invalid)
		case m.req == nil:
			c.log.Debug("jsonrpc2", "detail", "ignoring a response: the server sends no requests")
		default:
			c.handle(m.req, m.nullID)
		}
	}
}
