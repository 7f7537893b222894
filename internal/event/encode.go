package event

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// An event's JSON has one shape, written by AppendJSON and nowhere else:
// {"sessionId":…,"seq":…,"at":…,"type":…,"turnId":…?,"data":…?}, with
// data as handed in (valid JSON, checked when a draft reaches the
// journal). The journal stores those bytes and hands them back in
// Event.Raw; the wire splices them as stored, never decoding and
// re-encoding a row on its way out.

// AppendJSON appends e's JSON to b: e.Raw as is when set, else e encoded.
func AppendJSON(b []byte, e *Event) []byte {
	if e.Raw != nil {
		return append(b, e.Raw...)
	}
	b = append(b, `{"sessionId":`...)
	b = AppendString(b, e.SessionID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"at":`...)
	b = appendTime(b, e.At)
	b = append(b, `,"type":`...)
	b = AppendString(b, e.Type)
	if e.TurnID != "" {
		b = append(b, `,"turnId":`...)
		b = AppendString(b, e.TurnID)
	}
	if len(e.Data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, e.Data...)
	}
	return append(b, '}')
}

// AppendEvents appends the JSON array of evs ("[]" for none, nil
// included: the wire never says null).
func AppendEvents(b []byte, evs []Event) []byte {
	b = append(b, '[')
	for i := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSON(b, &evs[i])
	}
	return append(b, ']')
}

// EncodedSize is AppendJSON's output size: exact with Raw, else a hint.
func EncodedSize(e *Event) int {
	if e.Raw != nil {
		return len(e.Raw)
	}
	return 96 + len(e.SessionID) + len(e.Type) + len(e.TurnID) + len(e.Data)
}

// appendTime writes t as RFC 3339 with nanoseconds, quoted, as
// time.Time.MarshalJSON does; a time it refuses (year outside 0..9999)
// becomes null rather than invalid JSON.
func appendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// AppendString appends s quoted as json.Marshal quotes it: as is when
// nothing needs escaping, else through encoding/json.
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
