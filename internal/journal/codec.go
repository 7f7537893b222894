package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/internal/event"
)

// Rows are the JSON of event.Event, written by encodeEvent in one fixed
// shape (sessionId, seq, at, type, turnId?, data?) so decodeEvent can take a
// fast path over them; a row of any other shape still decodes through
// encoding/json, and one that is not an event at all is an error.

var errBadRow = errors.New("row is not an event")

// encodeEvent appends ev's JSON. ev.Data must be valid JSON (checked when
// drafts are handed in).
func encodeEvent(ev *event.Event) ([]byte, error) {
	b := make([]byte, 0, 96+len(ev.SessionID)+len(ev.Type)+len(ev.TurnID)+len(ev.Data))
	b = append(b, `{"sessionId":`...)
	b = appendString(b, ev.SessionID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, ev.Seq, 10)
	b = append(b, `,"at":"`...)
	b = ev.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","type":`...)
	b = appendString(b, ev.Type)
	if ev.TurnID != "" {
		b = append(b, `,"turnId":`...)
		b = appendString(b, ev.TurnID)
	}
	if len(ev.Data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, ev.Data...)
	}
	return append(b, '}'), nil
}

// appendString quotes s as JSON: as is when nothing needs escaping, else
// through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// decodeEvent parses a row; the bytes may be reused after it returns.
func decodeEvent(v []byte) (event.Event, error) {
	if ev, ok := decodeFast(v); ok {
		return ev, nil
	}
	var ev event.Event
	if err := json.Unmarshal(v, &ev); err != nil {
		return event.Event{}, err
	}
	if ev.Type == "" {
		return event.Event{}, errBadRow
	}
	return ev, nil
}

// decodeFast parses the shape encodeEvent writes, with no escapes in its
// strings; false means "use the slow path".
func decodeFast(p []byte) (ev event.Event, ok bool) {
	var s []byte
	if p, ok = cut(p, `{"sessionId":`); !ok {
		return ev, false
	}
	if s, p, ok = plainString(p); !ok {
		return ev, false
	}
	ev.SessionID = string(s)
	if p, ok = cut(p, `,"seq":`); !ok {
		return ev, false
	}
	i := 0
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	seq, err := strconv.ParseUint(string(p[:i]), 10, 64)
	if err != nil {
		return ev, false
	}
	ev.Seq = seq
	if p, ok = cut(p[i:], `,"at":`); !ok {
		return ev, false
	}
	if s, p, ok = plainString(p); !ok {
		return ev, false
	}
	if ev.At, err = time.Parse(time.RFC3339Nano, string(s)); err != nil {
		return ev, false
	}
	if p, ok = cut(p, `,"type":`); !ok {
		return ev, false
	}
	if s, p, ok = plainString(p); !ok || len(s) == 0 {
		return ev, false
	}
	ev.Type = internType(s)
	if q, found := cut(p, `,"turnId":`); found {
		if s, p, ok = plainString(q); !ok {
			return ev, false
		}
		ev.TurnID = string(s)
	}
	if q, found := cut(p, `,"data":`); found {
		if len(q) < 2 || q[len(q)-1] != '}' || !json.Valid(q[:len(q)-1]) {
			return ev, false
		}
		ev.Data = bytes.Clone(q[:len(q)-1])
		return ev, true
	}
	return ev, string(p) == "}"
}

func cut(p []byte, prefix string) ([]byte, bool) {
	if len(p) < len(prefix) || string(p[:len(prefix)]) != prefix {
		return p, false
	}
	return p[len(prefix):], true
}

// plainString reads a JSON string without escapes.
func plainString(p []byte) (s, rest []byte, ok bool) {
	if len(p) == 0 || p[0] != '"' {
		return nil, p, false
	}
	for i := 1; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"':
			return p[1:i], p[i+1:], true
		case c == '\\' || c < 0x20:
			return nil, p, false
		}
	}
	return nil, p, false
}

var knownTypes = []string{event.SessionCreated, event.LeaseAcquired, event.ProviderStarted,
	event.ProviderThreadReplace, event.TurnStarted, event.MessageDelta, event.MessageCompleted,
	event.ApprovalRequested, event.ApprovalResolved, event.TurnCompleted, event.ProviderExited,
	event.SessionEnded, event.LeaseReleased, event.JournalLoss}

// internType returns the constant for a known type (no allocation).
func internType(b []byte) string {
	for _, t := range knownTypes {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}
