package event

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends e's JSON to b: byte for byte what json.Marshal(e)
// gives, without reflection and without re-compacting Data. e.Data must be
// valid JSON (the journal checks it when a draft is handed in and again
// when a row is read back). Data that json.Marshal would rewrite (blanks
// between tokens, or '<', '>', '&', U+2028, U+2029 inside strings, which it
// escapes), a string that needs escaping, or a time json.Marshal refuses
// takes encoding/json's path, so the output stays identical; an error is
// json.Marshal's.
func AppendJSON(b []byte, e *Event) ([]byte, error) {
	if !fastTime(e.At) || !compactData(e.Data) {
		return appendMarshal(b, e)
	}
	b = append(b, `{"sessionId":`...)
	b = AppendString(b, e.SessionID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"at":"`...)
	b = e.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","type":`...)
	b = AppendString(b, e.Type)
	if e.TurnID != "" {
		b = append(b, `,"turnId":`...)
		b = AppendString(b, e.TurnID)
	}
	if len(e.Data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, e.Data...)
	}
	return append(b, '}'), nil
}

// AppendEvents appends the JSON array of evs, as json.Marshal gives it
// for a non-nil slice ("[]" for none, nil included: the wire never says null).
func AppendEvents(b []byte, evs []Event) ([]byte, error) {
	b = append(b, '[')
	for i := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = AppendJSON(b, &evs[i]); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// EncodedSize is a capacity hint for AppendJSON's output.
func EncodedSize(e *Event) int {
	return 96 + len(e.SessionID) + len(e.Type) + len(e.TurnID) + len(e.Data)
}

func appendMarshal(b []byte, v any) ([]byte, error) {
	q, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, q...), nil
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

// fastTime: t.MarshalJSON would succeed and equals RFC3339Nano in quotes.
func fastTime(t time.Time) bool {
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	return off > -24*3600 && off < 24*3600
}

// compactData reports whether json.Marshal would copy d (valid JSON)
// unchanged: no blank outside strings, nothing it HTML-escapes inside them.
func compactData(d []byte) bool {
	inStr := false
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !inStr {
			switch c {
			case '"':
				inStr = true
			case ' ', '\t', '\n', '\r':
				return false
			}
			continue
		}
		switch c {
		case '\\':
			i++ // the escaped byte cannot end the string
		case '"':
			inStr = false
		case '<', '>', '&':
			return false
		case 0xE2: // U+2028 and U+2029 are E2 80 A8 and E2 80 A9
			if i+2 < len(d) && d[i+1] == 0x80 && d[i+2]&^1 == 0xA8 {
				return false
			}
		}
	}
	return true
}
