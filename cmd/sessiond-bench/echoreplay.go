package main

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/sourcegraph/jsonrpc2"
)

// The echo server's second baseline: the same server answering a method
// with the bytes the daemon answered it with, so that the client decodes
// the same reply on both sides and the ratio is the daemon's own cost.
// An echo of the request's params is the floor of the transport; a
// recorded reply is the floor of the transport for this reply.
const (
	// echoRecordMethod {"method": M, "result": R}: answer M with R on
	// replaying connections.
	echoRecordMethod = "bench.recordReply"
	// echoReplayMethod marks the calling connection as replaying.
	echoReplayMethod = "bench.replayReplies"
)

type recordParams struct {
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
}

// recordedReplies holds the recorded results and the replaying
// connections of one echo server.
type recordedReplies struct {
	mu        sync.RWMutex
	byMethod  map[string]json.RawMessage
	replaying map[*jsonrpc2.Conn]bool
}

// answer handles the two bench methods and, on a replaying connection, a
// method with a recorded result; ok is false for an echoed request.
func (rr *recordedReplies) answer(c *jsonrpc2.Conn, r *jsonrpc2.Request) (any, bool, error) {
	switch r.Method {
	case echoRecordMethod:
		var p recordParams
		if r.Params == nil || json.Unmarshal(*r.Params, &p) != nil || p.Method == "" || len(p.Result) == 0 {
			return nil, true, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: fmt.Sprintf("%s wants {method, result}", echoRecordMethod)}
		}
		rr.mu.Lock()
		defer rr.mu.Unlock()
		if rr.byMethod == nil {
			rr.byMethod = map[string]json.RawMessage{}
		}
		rr.byMethod[p.Method] = p.Result
		return json.RawMessage("true"), true, nil
	case echoReplayMethod:
		rr.mu.Lock()
		defer rr.mu.Unlock()
		if rr.replaying == nil {
			rr.replaying = map[*jsonrpc2.Conn]bool{}
		}
		rr.replaying[c] = true
		go func() { // forget the connection once it is gone
			<-c.DisconnectNotify()
			rr.mu.Lock()
			delete(rr.replaying, c)
			rr.mu.Unlock()
		}()
		return json.RawMessage("true"), true, nil
	}
	rr.mu.RLock()
	defer rr.mu.RUnlock()
	if !rr.replaying[c] {
		return nil, false, nil
	}
	res, ok := rr.byMethod[r.Method]
	return res, ok, nil
}
