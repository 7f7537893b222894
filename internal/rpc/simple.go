package rpc

import "encoding/json"

// Most requests look like {"id":7,"jsonrpc":"2.0","method":"m","params":{…}}
// (our client sends "params":{} when there are none). decodeSimple reads
// exactly that shape by hand, without reflection, and gives the request
// the general path (decodeRequest) would give; anything else (meta,
// another member, a member twice, an escape or a non-ASCII byte in the
// envelope's strings, a null, negative, fractional or long id, no id,
// params that are not an object or an array) is left to the general path.
// Params are kept as sent: a slice of b, checked to be valid JSON.

// decodeSimple returns the request in b, or ok false when b is not of the
// simple shape: an object of exactly the members "jsonrpc" (a plain
// string), "id" (a plain string or an integer of 1 to 18 digits without a
// leading zero), "method" (a plain string) and optionally "params" (an
// object or an array), in any order, JSON white space anywhere between
// tokens. Plain: printable ASCII without '"' or
// '\', so the bytes are the value.
func decodeSimple(b []byte) (req *request, ok bool) {
	var (
		i                      int
		haveRPC, haveID, haveM bool
		haveParams             bool
		r                      request
	)
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	// str reads a plain string at i (its bytes, a slice of b); ok false
	// if there is none.
	str := func() ([]byte, bool) {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		for j := i + 1; j < len(b); j++ {
			switch c := b[j]; {
			case c == '"':
				s := b[i+1 : j]
				i = j + 1
				return s, true
			case c < 0x20 || c > 0x7e || c == '\\':
				return nil, false
			}
		}
		return nil, false
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
		switch string(key) {
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
			m, ok := str()
			if !ok {
				return nil, false
			}
			r.Method = string(m)
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
			if !validParams(b[i:end]) {
				return nil, false
			}
			r.Params, i, haveParams = b[i:end:end], end, true
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
// the general path reads it) into id.
func simpleID(b []byte, i *int, x *requestID) bool {
	j := *i
	if j < len(b) && b[j] == '"' {
		for k := j + 1; k < len(b); k++ {
			switch c := b[k]; {
			case c == '"':
				*x = requestID{Str: string(b[j+1 : k]), IsString: true}
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
	*x = requestID{Num: n}
	*i = k
	return true
}

// validParams reports whether v, an object or an array by its first
// byte, is valid JSON ("{}", the common case, at once).
func validParams(v []byte) bool {
	return (len(v) == 2 && v[0] == '{' && v[1] == '}') || json.Valid(v)
}

// skipValue returns the end of the object or array that starts at b[i]
// (brackets balanced outside strings), or -1: not one, or unterminated.
// It does not validate; validParams does.
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
