package api

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Bounds on what a client sends, checked once at the RPC edge (the
// Validate methods below, called by rpc) before a value reaches the host,
// the store or a shared journal batch. docs/protocol.md "Limits" lists them
// and a test keeps that list in step with these constants. String bounds
// are in bytes of UTF-8.
const (
	// MaxIDBytes bounds every client-chosen id or tag: holderId, holdToken,
	// clientMessageId, requestId, subscriptionId, surface, provider, and
	// initialize's client name and version. Far below bbolt's 32 KiB key
	// limit, so a client id used as a key can never fail a journal batch.
	MaxIDBytes = 256
	// MaxDeviceBytes bounds initialize's client.device (the device a
	// surface runs on, recorded in every origin it sends), without
	// control characters.
	MaxDeviceBytes = 256
	// MaxTitleBytes bounds a session title.
	MaxTitleBytes = 4096
	// MaxCwdBytes bounds a session's cwd (Linux PATH_MAX).
	MaxCwdBytes = 4096
	// MaxOptionsBytes bounds create's options (stored in every record).
	MaxOptionsBytes = 64 << 10
	// MaxTTLMs bounds a hold's ttlMs: 7 days.
	MaxTTLMs = 7 * 24 * 60 * 60 * 1000
	// DefaultPageEvents is an attach/read page's size when limit is 0 or absent.
	DefaultPageEvents = 256
	// MaxPageEvents bounds attach/read limit.
	MaxPageEvents = 4096
	// DefaultListSessions is an agentSession.list page's size when limit
	// is 0 or absent (old clients that send no params get this page).
	DefaultListSessions = 256
	// MaxListSessions bounds agentSession.list limit.
	MaxListSessions = 4096
	// MaxCursorBytes bounds agentSession.list cursor (the daemon's own
	// cursors are far shorter).
	MaxCursorBytes = 512
	// EchoPrefixBytes is the most of a bad value an error message repeats.
	EchoPrefixBytes = 32
)

// Prefix returns s cut to at most EchoPrefixBytes bytes (on a rune
// boundary) with "…" appended when cut: the only part of a client value an
// error may repeat.
func Prefix(s string) string { return Truncate(s, EchoPrefixBytes) }

// Truncate cuts s to at most n bytes on a rune boundary, appending "…"
// when it cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Quote is Prefix quoted with %q (control characters escaped), for
// messages that name a client value.
func Quote(s string) string { return fmt.Sprintf("%q", Prefix(s)) }

// tooLong is the invalid_params error of a string over its bound: it names
// the field and the limit and repeats only a prefix of the value.
func tooLong(field, v string, limit int) *Error {
	return &Error{Kind: KindInvalidParams,
		Msg:  fmt.Sprintf("%s: %d bytes, over the limit of %d bytes (starts %s)", field, len(v), limit, Quote(v)),
		Data: map[string]any{"field": field, "limit": limit}}
}

// checkString refuses v when required and empty, or longer than limit.
func checkString(field, v string, limit int, required bool) error {
	if v == "" && required {
		return InvalidParam(field, "required")
	}
	if len(v) > limit {
		return tooLong(field, v, limit)
	}
	return nil
}

// CheckDevice checks initialize's optional client.device: at most
// MaxDeviceBytes without control characters (it is shown to people and
// journaled in every origin; JSON decoding already made it valid UTF-8).
func CheckDevice(field, v string) error {
	if err := checkString(field, v, MaxDeviceBytes, false); err != nil {
		return err
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return InvalidParam(field, "holds the control character %U (starts %s)", r, Quote(v))
		}
	}
	return nil
}

// CheckID checks a required client id (MaxIDBytes).
func CheckID(field, v string) error { return checkString(field, v, MaxIDBytes, true) }

// CheckOptionalID checks an optional client id (MaxIDBytes).
func CheckOptionalID(field, v string) error { return checkString(field, v, MaxIDBytes, false) }

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
