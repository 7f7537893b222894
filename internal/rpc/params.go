package rpc

import (
	"encoding/json"
	"errors"

	"github.com/sessiond/sessiond/internal/api"
)

// validator is a params type that checks itself (internal/api's Validate
// methods, and initialize's below).
type validator interface{ Validate() error }

// decodeValid decodes params into v and validates it: the one place a
// request's fields are checked before any handler acts on them.
func decodeValid(params json.RawMessage, v validator) error {
	if err := decode(params, v); err != nil {
		return err
	}
	return v.Validate()
}

// maxDecodeErrBytes bounds a decoding error repeated to the client (a
// field's own UnmarshalJSON may quote the value).
const maxDecodeErrBytes = 160

// decode unmarshals params (absent or null = {}) into v, turning type
// mismatches into invalid_params naming the field.
func decode(params json.RawMessage, v any) error {
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	if params[0] != '{' {
		return api.InvalidParam("params", "must be an object")
	}
	if err := json.Unmarshal(params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "params"
			}
			// Value can hold the literal ("number 1111…"): a prefix only.
			return api.InvalidParam(field, "want %s, got %s", te.Type, api.Prefix(te.Value))
		}
		return api.InvalidParam("params", "%s", api.Truncate(err.Error(), maxDecodeErrBytes))
	}
	return nil
}

// Validate checks initialize's params: the version is present; the
// client's name and version (logged) are bounded like ids.
func (p *InitializeParams) Validate() error {
	if p.ProtocolVersion == nil {
		return api.InvalidParam("protocolVersion", "required")
	}
	if err := api.CheckOptionalID("client.name", p.Client.Name); err != nil {
		return err
	}
	if err := api.CheckOptionalID("client.version", p.Client.Version); err != nil {
		return err
	}
	return api.CheckDevice("client.device", p.Client.Device)
}

// InitializeParams is initialize's params.
type InitializeParams struct {
	ProtocolVersion *int       `json:"protocolVersion"`
	Client          ClientInfo `json:"client"`
	Capabilities    []string   `json:"capabilities"`
}

// ClientInfo names a client or the server. Device (a client's only) is
// the device the surface runs on, e.g. the phone a relay forwards for:
// it goes into the origin of every turn and answer the connection sends.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Device  string `json:"device,omitempty"`
}

// InitializeResult is initialize's result.
type InitializeResult struct {
	ProtocolVersion int        `json:"protocolVersion"`
	Server          ClientInfo `json:"server"`
	Capabilities    []string   `json:"capabilities"`
	// Negotiated is what this connection has: client ∩ server, in the
	// client's order (PROTOCOL.md "Handshake and capabilities").
	Negotiated   []string `json:"negotiated"`
	ConnectionID string   `json:"connectionId"`
}

// Status is daemon.status's result.
type Status struct {
	Version         string            `json:"version"`
	ProtocolVersion int               `json:"protocolVersion"`
	PID             int               `json:"pid"`
	StartedAt       string            `json:"startedAt"`
	Socket          string            `json:"socket"`
	StateDir        string            `json:"stateDir"`
	StateID         string            `json:"stateId"`
	Sessions        api.SessionCounts `json:"sessions"`
	Connections     int               `json:"connections"`
	Providers       []string          `json:"providers"`
	// Attention is keep-awake's and notify's state (absent when the
	// daemon runs without them, as in-process tests do).
	Attention *api.AttentionStatus `json:"attention,omitempty"`
	// Runtimes: the shared provider processes (only for a connection
	// that negotiated agent-session.runtimes.v1).
	Runtimes    []api.RuntimeInfo `json:"runtimes,omitempty"`
	Supervision api.Supervision   `json:"supervision"`
}
