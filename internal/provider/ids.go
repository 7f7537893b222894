package provider

import (
	"encoding/json"
	"strconv"
)

// RequestKey is the text a provider's request id is named by (after the
// adapter's RequestIDPrefix), and whether raw is an id at all: JSON-RPC
// and Claude Code ids are strings or numbers, and ids of different types
// are different ids. A number is its text (an integer in canonical form);
// a string is its contents, unless those could be read as a number or
// start with a quote: then it is the string's JSON text, quotes and all.
// So the number 9 is `9` and the string "9" is `"9"`: two open requests
// never share a key. A text longer than MaxRequestKeyID is named by a
// digest (shortKey).
func RequestKey(raw json.RawMessage) (string, bool) {
	k, ok := requestIDText(raw)
	return shortKey(k), ok
}

// requestIDText is RequestKey before shortKey.
func requestIDText(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		if s == "" || s[0] != '"' && !looksNumeric(s) {
			return s, true
		}
		b, _ := json.Marshal(s)
		return string(b), true
	case c == '-' || c >= '0' && c <= '9':
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return "", false
		}
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return strconv.FormatInt(i, 10), true
		}
		return n.String(), true
	}
	return "", false
}

// looksNumeric: s is the text of a JSON number (so it could be a number
// id's key).
func looksNumeric(s string) bool {
	if s[0] != '-' && (s[0] < '0' || s[0] > '9') {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}
