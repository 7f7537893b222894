package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Request validation: one Validate method per params type, called by rpc
// right after decoding and before the Backend sees the request. The host
// does not check these again. Each failure is invalid_params with
// data.field (and data.limit for a bound) and repeats at most a prefix of
// the bad value.

// sessionIDRe is what a session id looks like (the host makes "s_" + 16
// characters; clients may name any id of this shape).
var sessionIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{8,128}$`)

// CheckSessionID checks a session id against ^[A-Za-z0-9_-]{8,128}$.
func CheckSessionID(field, id string) error {
	if id == "" {
		return InvalidParam(field, "required")
	}
	if !sessionIDRe.MatchString(id) {
		return &Error{Kind: KindInvalidParams, Msg: fmt.Sprintf("%s: %s does not match %s", field, Quote(id), sessionIDRe),
			Data: map[string]any{"field": field}}
	}
	return nil
}

// checkCwd: required, absolute, at most MaxCwdBytes, an existing directory.
func checkCwd(cwd string) error {
	if err := checkString("cwd", cwd, MaxCwdBytes, true); err != nil {
		return err
	}
	if !filepath.IsAbs(cwd) {
		return InvalidParam("cwd", "must be an absolute path, got %s", Quote(cwd))
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return InvalidParam("cwd", "%s is not an existing directory", Quote(cwd))
	}
	return nil
}

// checkPageLimit: 0 (the default page) .. MaxPageEvents.
func checkPageLimit(limit int) error {
	if limit < 0 || limit > MaxPageEvents {
		return &Error{Kind: KindInvalidParams, Msg: fmt.Sprintf("limit: must be 0..%d, got %d", MaxPageEvents, limit),
			Data: map[string]any{"field": "limit", "limit": MaxPageEvents}}
	}
	return nil
}

// Validate checks create's params; the provider's existence is the host's
// (it knows the config).
func (p CreateParams) Validate() error {
	if err := firstErr(
		CheckID("provider", p.Provider),
		checkString("title", p.Title, MaxTitleBytes, false),
		checkAccount("account", p.Account, false),
	); err != nil {
		return err
	}
	if len(p.Options) > MaxOptionsBytes {
		return &Error{Kind: KindInvalidParams,
			Msg:  fmt.Sprintf("options: %d bytes, over the limit of %d bytes", len(p.Options), MaxOptionsBytes),
			Data: map[string]any{"field": "options", "limit": MaxOptionsBytes}}
	}
	if err := checkObject("options", p.Options); err != nil {
		return err
	}
	return checkCwd(p.Cwd)
}

// Validate checks a params object that names one session.
func (p SessionParams) Validate() error { return CheckSessionID("sessionId", p.SessionID) }

// Validate checks hold's params: ttlMs, when present, is 1..MaxTTLMs.
func (p HoldParams) Validate() error {
	if err := firstErr(
		CheckSessionID("sessionId", p.SessionID),
		CheckID("holderId", p.HolderID),
		CheckOptionalID("surface", p.Surface),
	); err != nil {
		return err
	}
	if p.TTLMs != nil && (*p.TTLMs <= 0 || *p.TTLMs > MaxTTLMs) {
		return &Error{Kind: KindInvalidParams, Msg: fmt.Sprintf("ttlMs: must be 1..%d (7 days), got %d", MaxTTLMs, *p.TTLMs),
			Data: map[string]any{"field": "ttlMs", "limit": MaxTTLMs}}
	}
	return nil
}

// Validate checks release's params.
func (p ReleaseParams) Validate() error {
	return firstErr(
		CheckSessionID("sessionId", p.SessionID),
		CheckID("holderId", p.HolderID),
		CheckOptionalID("holdToken", p.HoldToken),
	)
}

// Validate checks attach's params.
func (p AttachParams) Validate() error {
	return firstErr(CheckSessionID("sessionId", p.SessionID), checkPageLimit(p.Limit))
}

// Validate checks list's params: limit 0 (the default page) ..
// MaxListSessions, cursor at most MaxCursorBytes (what it holds is the
// host's to check).
func (p ListParams) Validate() error {
	if p.Limit < 0 || p.Limit > MaxListSessions {
		return &Error{Kind: KindInvalidParams, Msg: fmt.Sprintf("limit: must be 0..%d sessions (0 or absent: %d), got %d", MaxListSessions, DefaultListSessions, p.Limit),
			Data: map[string]any{"field": "limit", "limit": MaxListSessions}}
	}
	return checkString("cursor", p.Cursor, MaxCursorBytes, false)
}

// Validate checks read's params.
func (p ReadParams) Validate() error {
	return firstErr(CheckSessionID("sessionId", p.SessionID), checkPageLimit(p.Limit))
}

// Validate checks detach's params.
func (p DetachParams) Validate() error { return CheckID("subscriptionId", p.SubscriptionID) }

// Validate checks send's params. text has no bound of its own: the frame
// that carries it is bounded by max_message_bytes.
func (p SendParams) Validate() error {
	if err := CheckSessionID("sessionId", p.SessionID); err != nil {
		return err
	}
	if p.Text == "" {
		return InvalidParam("text", "required")
	}
	return CheckOptionalID("clientMessageId", p.ClientMessageID)
}

// Validate checks respond's params.
func (p RespondParams) Validate() error {
	if err := firstErr(
		CheckSessionID("sessionId", p.SessionID),
		CheckID("requestId", p.RequestID),
	); err != nil {
		return err
	}
	switch p.Decision {
	case "approve", "deny", "approveForSession", "cancel":
	default:
		return InvalidParam("decision", "must be \"approve\", \"approveForSession\", \"deny\" or \"cancel\", got %s", Quote(p.Decision))
	}
	size := 0
	for q, v := range p.Answers {
		size += len(q)
		for _, a := range v {
			size += len(a)
		}
	}
	if size > MaxOptionsBytes {
		return &Error{Kind: KindInvalidParams, Msg: fmt.Sprintf("answers: %d bytes, over the limit of %d bytes", size, MaxOptionsBytes),
			Data: map[string]any{"field": "answers", "limit": MaxOptionsBytes}}
	}
	if len(p.Content) > MaxOptionsBytes {
		return &Error{Kind: KindInvalidParams, Msg: fmt.Sprintf("content: %d bytes, over the limit of %d bytes", len(p.Content), MaxOptionsBytes),
			Data: map[string]any{"field": "content", "limit": MaxOptionsBytes}}
	}
	return checkObject("content", p.Content)
}

// checkObject: a JSON value a client may leave out (or send null) but
// must otherwise send as an object.
func checkObject(field string, v json.RawMessage) error {
	if o := bytes.TrimSpace(v); len(o) > 0 && o[0] != '{' && string(o) != "null" {
		return InvalidParam(field, "must be an object")
	}
	return nil
}

// CheckV1Decision refuses what only approvals.v2 may send.
func (p RespondParams) CheckV1Decision() error {
	if p.Decision != "approve" && p.Decision != "deny" {
		return InvalidParam("decision", "must be \"approve\" or \"deny\" without %s, got %s", CapApprovalsV2, Quote(p.Decision))
	}
	if p.Answers != nil || p.Content != nil {
		return InvalidParam("answers", "answers and content need %s", CapApprovalsV2)
	}
	return nil
}

// Validate checks daemon.upgrade's params: binary, when set, is an
// absolute path of at most MaxCwdBytes (Linux PATH_MAX) with no NUL byte
// (no path has one: the kernel would refuse it as EINVAL).
func (p UpgradeParams) Validate() error {
	if p.Binary == "" {
		return nil
	}
	if err := checkString("binary", p.Binary, MaxCwdBytes, false); err != nil {
		return err
	}
	if strings.IndexByte(p.Binary, 0) >= 0 {
		return InvalidParam("binary", "must not contain a NUL byte, got %s", Quote(p.Binary))
	}
	if !filepath.IsAbs(p.Binary) {
		return InvalidParam("binary", "must be an absolute path, got %s", Quote(p.Binary))
	}
	return nil
}
