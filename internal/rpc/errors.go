package rpc

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/store"
)

// JSON-RPC codes of the protocol errors.
const (
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
)

// kindCodes maps each api.Kind to its code (PROTOCOL.md's error table);
// the data.reason is the kind's String().
var kindCodes = map[api.Kind]int64{
	api.KindInternal:            CodeInternal,
	api.KindInvalidParams:       CodeInvalidParams,
	api.KindNotInitialized:      -32002,
	api.KindUnsupportedProtocol: -32003,
	api.KindSessionNotFound:     -32010,
	api.KindSessionNotLive:      -32011,
	api.KindSessionOwned:        -32012,
	api.KindStaleFence:          -32013,
	api.KindEvictionFailed:      -32014,
	api.KindExitUnproven:        -32015,
	api.KindProviderFailed:      -32016,
	api.KindTurnRunning:         -32017,
	api.KindInvalidState:        -32018,
	api.KindLimitExceeded:       -32019,
	api.KindUnknownProvider:     -32020,
	api.KindCursorAhead:         -32021,
	api.KindCursorCompacted:     -32022,
	api.KindRequestNotFound:     -32023,
	api.KindUpgradeRefused:      -32024,
	api.KindUnknownAccount:      -32025,
	api.KindSessionDamaged:      -32028,
	api.KindStoreUnavailable:    -32027,
	api.KindThreadBusy:          -32026,
}

// protoError is a protocol-level error (not an api.Kind): method_not_found,
// capability_not_negotiated, already_initialized.
type protoError struct {
	code   int64
	reason string
	msg    string
	data   map[string]any
}

func (e *protoError) Error() string { return e.msg }

func errMethodNotFound(method string) error {
	return &protoError{CodeMethodNotFound, "method_not_found", "method not found: " + api.Quote(method),
		map[string]any{"method": api.Prefix(method)}}
}

func errCapability(method, capability string) error {
	return &protoError{CodeMethodNotFound, "capability_not_negotiated",
		fmt.Sprintf("%s needs capability %s, not negotiated", method, capability), map[string]any{"capability": capability}}
}

func errInvalidID() error {
	return &protoError{CodeInvalidRequest, "invalid_request", "id must be a string, an integer from 0 to 2^63-1, or null",
		map[string]any{"field": "id"}}
}

func errAlreadyInitialized() error {
	return &protoError{CodeInvalidRequest, "already_initialized", "already initialized", nil}
}

// toWire turns any handler error into a JSON-RPC error with data.reason.
func toWire(err error) *errorObject {
	var pe *protoError
	if errors.As(err, &pe) {
		return wireError(pe.code, pe.msg, pe.reason, pe.data)
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		code, ok := kindCodes[ae.Kind]
		if !ok {
			code = CodeInternal
		}
		return wireError(code, ae.Error(), ae.Kind.String(), ae.Data)
	}
	if store.IsUnavailable(err) {
		// Whichever write the store refused (journal, lease, record): the
		// one storage failure a client can act on, so it gets its kind here
		// rather than at each of host's call sites.
		k := api.KindStoreUnavailable
		return wireError(kindCodes[k], err.Error(), k.String(), map[string]any{"cause": cutCause(err.Error())})
	}
	return wireError(CodeInternal, err.Error(), api.KindInternal.String(), nil)
}

// cutCause is an error's text for data.cause, at most 512 bytes.
func cutCause(s string) string {
	if len(s) > 512 {
		return s[:512] + "…"
	}
	return s
}

func wireError(code int64, msg, reason string, data map[string]any) *errorObject {
	d := make(map[string]any, len(data)+1)
	for k, v := range data {
		d[k] = v
	}
	d["reason"] = reason
	e := &errorObject{Code: code, Message: msg}
	b, err := json.Marshal(d)
	if err != nil {
		b = []byte(`{"reason":"` + reason + `"}`)
	}
	raw := json.RawMessage(b)
	e.Data = &raw
	return e
}

// Error is a server error as the client sees it.
type Error struct {
	Code    int64
	Message string
	Reason  string
	Data    map[string]any
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d %s)", e.Message, e.Code, e.Reason)
}

// Is matches another *Error with the same reason (or code when the
// target has no reason), so errors.Is(err, &rpc.Error{Reason: "session_not_found"}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	if t.Reason != "" {
		return t.Reason == e.Reason
	}
	return t.Code == e.Code
}

func fromWire(je *jsonrpc2.Error) *Error {
	e := &Error{Code: je.Code, Message: je.Message}
	if je.Data != nil {
		json.Unmarshal(*je.Data, &e.Data)
		if r, ok := e.Data["reason"].(string); ok {
			e.Reason = r
		}
	}
	return e
}
