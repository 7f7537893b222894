package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The server's own JSON-RPC 2.0 message types, as gopls' jsonrpc2_v2 keeps
// its own: a request keeps its params raw, exactly as sent, and the
// method decodes them once into its own params type (handlers.go,
// queued.go); an id is echoed as read. sourcegraph/jsonrpc2 serves the Go
// client (client.go) and nothing on the server's side.

// request is one JSON-RPC request as read.
type request struct {
	Method string
	ID     requestID
	// Params are the "params" member as sent (a slice of the frame, which
	// is never reused): nil when absent, "null" when null.
	Params json.RawMessage
	Notif  bool // no id: a notification, never answered
}

// requestID is a request's id: a string, or an integer from 0 to 2^63-1.
type requestID struct {
	Num      uint64
	Str      string
	IsString bool
}

// String is the id as a log shows it: a string quoted, a number as is.
func (i requestID) String() string {
	if i.IsString {
		return strconv.Quote(i.Str)
	}
	return strconv.FormatUint(i.Num, 10)
}

// unmarshal reads an id as appendID writes it: a JSON string, or an
// integer from 0 to 2^63-1.
func (i *requestID) unmarshal(raw []byte) error {
	if len(raw) > 0 && raw[0] == '"' {
		i.IsString = true
		return json.Unmarshal(raw, &i.Str)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("not a request id: %s", raw)
	}
	i.Num = uint64(n)
	return nil
}

// errorObject is a response's error, JSON-RPC 2.0's "Error object" (the
// same fields, names and encoding as jsonrpc2.Error, which the client
// decodes it into).
type errorObject struct {
	Code    int64            `json:"code"`
	Message string           `json:"message"`
	Data    *json.RawMessage `json:"data,omitempty"`
}

// errMissingMethod: an object with no "method" string (exact name) is no
// request.
var errMissingMethod = errors.New("missing method field")

// decodeRequest decodes a request that is not of the simple shape (a
// valid JSON object whose id the probe found usable): its members by
// exact name, the last of a repeated one, as JSON-RPC reads them; params
// kept as sent; no "id" (or null) is a notification.
func decodeRequest(data []byte) (*request, error) {
	var ms map[string]json.RawMessage
	if err := json.Unmarshal(data, &ms); err != nil {
		return nil, err
	}
	r := &request{Params: ms["params"]}
	raw, ok := ms["method"]
	if !ok || raw[0] != '"' || json.Unmarshal(raw, &r.Method) != nil {
		return nil, errMissingMethod
	}
	switch raw, ok := ms["id"]; {
	case !ok || string(raw) == "null":
		r.Notif = true
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &r.ID.Str); err != nil {
			return nil, err
		}
		r.ID.IsString = true
	default:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n < 0 { // the probe answered these -32600 already
			return nil, fmt.Errorf("failed to unmarshal ID: %s", raw)
		}
		r.ID.Num = uint64(n)
	}
	return r, nil
}

// response is what a client's response must decode to before it is
// ignored (jsonrpc2's Response did the same): an id that is a uint64 or a
// string (null reads as 0) and an error object of the right types; any
// other is a decode error, which ends the connection.
type response struct {
	ID    responseID `json:"id"`
	Error *struct {
		Code    int64            `json:"code"`
		Message string           `json:"message"`
		Data    *json.RawMessage `json:"data"`
	} `json:"error"`
}

// responseID is a response's id: a uint64 or a string, else an error.
type responseID struct{}

func (responseID) UnmarshalJSON(b []byte) error {
	var n uint64
	if json.Unmarshal(b, &n) == nil {
		return nil
	}
	var s string
	return json.Unmarshal(b, &s)
}
