package rpc

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"

	"github.com/sessiond/sessiond/internal/api"
)

var sessionIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{8,128}$`)

// maxAttachLimit is the largest attach/read page.
const maxAttachLimit = 4096

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
			return api.InvalidParam(field, "want %s, got %s", te.Type, te.Value)
		}
		return api.InvalidParam("params", "%v", err)
	}
	return nil
}

func checkSessionID(field, id string) error {
	if id == "" {
		return api.InvalidParam(field, "required")
	}
	if !sessionIDRe.MatchString(id) {
		return api.InvalidParam(field, "must match %s", sessionIDRe)
	}
	return nil
}

func required(field, v string) error {
	if v == "" {
		return api.InvalidParam(field, "required")
	}
	return nil
}

func checkCwd(cwd string) error {
	if cwd == "" {
		return api.InvalidParam("cwd", "required")
	}
	if !filepath.IsAbs(cwd) {
		return api.InvalidParam("cwd", "must be an absolute path, got %q", cwd)
	}
	fi, err := os.Stat(cwd)
	if err != nil || !fi.IsDir() {
		return api.InvalidParam("cwd", "%q is not an existing directory", cwd)
	}
	return nil
}

func checkLimit(limit int) error {
	if limit < 0 || limit > maxAttachLimit {
		return api.InvalidParam("limit", "must be 0..%d, got %d", maxAttachLimit, limit)
	}
	return nil
}

// InitializeParams is initialize's params.
type InitializeParams struct {
	ProtocolVersion *int       `json:"protocolVersion"`
	Client          ClientInfo `json:"client"`
	Capabilities    []string   `json:"capabilities"`
}

// ClientInfo names a client or the server.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// InitializeResult is initialize's result.
type InitializeResult struct {
	ProtocolVersion int        `json:"protocolVersion"`
	Server          ClientInfo `json:"server"`
	Capabilities    []string   `json:"capabilities"`
	ConnectionID    string     `json:"connectionId"`
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
}
