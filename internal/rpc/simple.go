package rpc

import (
	"bytes"
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"
)

// Most requests look like {"id":7,"jsonrpc":"2.0","method":"m","params":{…}}
// (our client sends "params":{} when there are none).
// jsonrpc2's decoding of one (a probe, then a map through a json.Decoder
// with UseNumber, then the id again) costs several microseconds, more
// than the rest of the server's work on a status but the read and write.
// decodeSimple reads exactly that shape by hand and gives the request
// jsonrpc2 would give; anything else (params, meta, another member, a
// member twice, an escape or a non-ASCII byte in the envelope's strings,
// a null, negative, fractional or long id, no id, params that are not an
// object or an array) is left to the general path. Params are what
// jsonrpc2 makes of them: decoded with UseNumber and marshalled again
// (sorted keys, the last of a repeated key, HTML-escaped), "{}" as is.

// decodeSimple returns the request in b, or ok false when b is not of the
// simple shape: an object of exactly the members "jsonrpc" (a plain
// string), "id" (a plain string or an integer of 1 to 18 digits without a
// leading zero), "method" (a plain string) and optionally "params" (an
// object or an array), in any order, JSON white space anywhere between
// tokens. Plain: printable ASCII without '"' or
// '\', so the bytes are the value.
func decodeSimple(b []byte) (req *jsonrpc2.Request, ok bool) {
	var (
		i                      int
		haveRPC, haveID, haveM bool
		haveParams             bool
		r                      jsonrpc2.Request
	)
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	// str reads a plain string at i; ok false if there is none.
	str := func() (string, bool) {
		if i >= len(b) || b[i] != '"' {
			return "", false
		}
		for j := i + 1; j < len(b); j++ {
			switch c := b[j]; {
			case c == '"':
				s := string(b[i+1 : j])
				i = j + 1
				return s, true
			case c < 0x20 || c > 0x7e || c == '\\':
				return "", false
			}
		}
		return "", false
	}
	ws()
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i++
	for {
		ws()
		key, ok := str()
		if !ok {
			return nil, false
		}
		ws()
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i++
		ws()
		switch key {
		case "jsonrpc":
			if haveRPC {
				return nil, false
			}
			if _, ok := str(); !ok {
				return nil, false
			}
			haveRPC = true
		case "method":
			if haveM {
				return nil, false
			}
			if r.Method, ok = str(); !ok {
				return nil, false
			}
			haveM = true
		case "id":
			if haveID || !simpleID(b, &i, &r.ID) {
				return nil, false
			}
			haveID = true
		case "params":
			if haveParams {
				return nil, false
			}
			end := skipValue(b, i)
			if end < 0 {
				return nil, false
			}
			p, ok := simpleParams(b[i:end])
			if !ok {
				return nil, false
			}
			r.Params, i, haveParams = &p, end, true
		default:
			return nil, false
		}
		ws()
		if i >= len(b) {
			return nil, false
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '}' {
			return nil, false
		}
		i++
		break
	}
	ws()
	if i != len(b) || !haveRPC || !haveID || !haveM {
		return nil, false
	}
	return &r, true
}

// simpleID reads at b[*i] a plain string or an integer of 1 to 18 digits
// (no sign, no leading zero, no fraction or exponent: below 2^63, as
// jsonrpc2 reads it) into id.
func simpleID(b []byte, i *int, id *jsonrpc2.ID) bool {
	j := *i
	if j < len(b) && b[j] == '"' {
		for k := j + 1; k < len(b); k++ {
			switch c := b[k]; {
			case c == '"':
				*id = jsonrpc2.ID{Str: string(b[j+1 : k]), IsString: true}
				*i = k + 1
				return true
			case c < 0x20 || c > 0x7e || c == '\\':
				return false
			}
		}
		return false
	}
	var n uint64
	k := j
	for k < len(b) && b[k] >= '0' && b[k] <= '9' {
		n = n*10 + uint64(b[k]-'0')
		k++
	}
	switch digits := k - j; {
	case digits == 0 || digits > 18:
		return false
	case digits > 1 && b[j] == '0':
		return false
	case k < len(b) && (b[k] == '.' || b[k] == 'e' || b[k] == 'E' || b[k] == '-' || b[k] == '+'):
		return false
	}
	*id = jsonrpc2.ID{Num: n}
	*i = k
	return true
}

// emptyParams is what jsonrpc2 makes of "params":{}.
var emptyParams = []byte("{}")

// simpleParams returns params as jsonrpc2 hands them to a handler: v
// decoded into an any with UseNumber, then json.Marshal; ok false when v
// is not an object or an array or is not valid JSON.
func simpleParams(v []byte) (json.RawMessage, bool) {
	if len(v) == 2 && v[0] == '{' && v[1] == '}' {
		return emptyParams, true
	}
	if v[0] != '{' && v[0] != '[' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if dec.Decode(&x) != nil || dec.InputOffset() != int64(len(v)) {
		return nil, false
	}
	out, err := json.Marshal(x)
	return out, err == nil
}

// skipValue returns the end of the object or array that starts at b[i]
// (brackets balanced outside strings), or -1: not one, or unterminated.
// It does not validate; simpleParams's decoder does.
func skipValue(b []byte, i int) int {
	if i >= len(b) || (b[i] != '{' && b[i] != '[') {
		return -1
	}
	depth, inStr := 0, false
	for j := i; j < len(b); j++ {
		c := b[j]
		switch {
		case inStr && c == '\\':
			j++
		case inStr:
			inStr = c != '"'
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}
