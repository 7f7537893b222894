package rpc

import (
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// The server reads its connections itself (jsonrpc2.Conn is the client's):
// messages decode exactly as jsonrpc2 decodes them (its Request's
// UnmarshalJSON, its request/response test), a response from the client is
// ignored as jsonrpc2 ignored it, and the first read error ends the
// connection.
//
// A slow method runs inline on the reading goroutine; if it is still
// running after handoffAfter, a new goroutine takes over reading, so one
// blocked call never stalls the connection for longer than that. Starting
// a goroutine per slow call instead cost ~25 µs per call on 2 cores (the
// runtime wakes a second thread for it), more than most holds and releases
// take.
const handoffAfter = 500 * time.Microsecond

// errNotMessage: neither a request nor a response (jsonrpc2's wording).
var errNotMessage = errors.New("jsonrpc2: unable to determine message type (request or response)")

// inMessage is one decoded message: a request, or nil for a response.
type inMessage struct{ req *jsonrpc2.Request }

// UnmarshalJSON is jsonrpc2's anyMessage test for a single message.
func (m *inMessage) UnmarshalJSON(data []byte) error {
	var probe struct {
		ID     any            `json:"id"`
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
	req := new(jsonrpc2.Request)
	if err := req.UnmarshalJSON(data); err != nil {
		return err
	}
	m.req = req
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

// readLoop reads and dispatches until a read fails or it hands reading
// over (see handle); the goroutine that meets the failure cancels c.ctx
// and closes c.done.
func (c *conn) readLoop() {
	for {
		var m inMessage
		if err := c.st.ReadObject(&m); err != nil {
			c.st.Close()
			c.cancel() // handlers' and pumps' ctx: a blocked call may hold the first reader
			c.closeOnce.Do(func() { close(c.done) })
			return
		}
		if m.req == nil {
			c.log.Debug("jsonrpc2", "detail", "ignoring a response: the server sends no requests")
			continue
		}
		if handedOff := c.handle(m.req); handedOff {
			return
		}
	}
}

// runInline runs a slow call on the reading goroutine and reports whether
// reading was handed to another goroutine meanwhile (then the caller stops
// reading).
func (c *conn) runInline(run func()) (handedOff bool) {
	var mu sync.Mutex
	done := false
	t := time.AfterFunc(handoffAfter, func() {
		mu.Lock()
		if done {
			mu.Unlock()
			return
		}
		handedOff = true
		mu.Unlock()
		c.readLoop() // this timer goroutine is the reader now
	})
	run()
	t.Stop()
	mu.Lock()
	done = true
	h := handedOff
	mu.Unlock()
	return h
}

// closed is closed once reading has ended.
func (c *conn) closed() <-chan struct{} { return c.done }
