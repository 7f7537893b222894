package rpc

import "github.com/sourcegraph/jsonrpc2"

// Most requests without params (daemon.status, agentSession.list without
// a filter, daemon.stats) look like {"jsonrpc":"2.0","id":7,"method":"m"}.
// jsonrpc2's decoding of one (a probe, then a map through a json.Decoder
// with UseNumber, then the id again) costs several microseconds, more
// than the rest of the server's work on a status but the read and write.
// decodeSimple reads exactly that shape by hand and gives the request
// jsonrpc2 would give; anything else (params, meta, another member, a
// member twice, an escape or a non-ASCII byte in a string, a null,
// negative, fractional or long id, no id) is left to the general path.

// decodeSimple returns the request in b, or ok false when b is not of the
// simple shape: an object of exactly the members "jsonrpc" (a plain
// string), "id" (a plain string or an integer of 1 to 18 digits without a
// leading zero) and "method" (a plain string), in any order, JSON white
// space anywhere between tokens. Plain: printable ASCII without '"' or
// '\', so the bytes are the value.
func decodeSimple(b []byte) (req *jsonrpc2.Request, ok bool) {
	var (
		i                      int
		haveRPC, haveID, haveM bool
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
