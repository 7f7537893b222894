package rpc

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
)

// FuzzDecodeSimple: whatever the bytes, when the hand decoder takes them
// (decodeSimple), they are valid JSON, no response, and encoding/json
// reads the same request from them: the "method" string, the "id" (a
// string, or an integer below 2^63), the "params" member's bytes as sent.
func FuzzDecodeSimple(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{}}`,
		`{"jsonrpc":"2.0","id":"\u0031","method":"m"}`,
		`{"jsonrpc":"2.0","id":"é","method":"a\u0062"}`,
		"{\"jsonrpc\":\"\",\"id\":0,\"method\":\"\xc0\"}",
		`{"jsonrpc":"2.0","id":007,"method":"m"}`,
		`{"jsonrpc":"2.0","id":-0,"method":"m"}`,
		`{"jsonrpc":"2.0","id":1e2,"method":"m"}`,
		`{"jsonrpc":"2.0","id":99999999999999999999,"method":"m"}`,
		`{"jsonrpc":"2.0","id":"","method":"m","params":[1.50e3,{"a":1,"a":2}]}`,
		`{"\u006dethod":"m","jsonrpc":"2.0","id":1}`,
		`{"Method":"m","jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"1.0","id":1,"method":"m","result":1}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xff\"}}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\x00",
		` { "jsonrpc" : "2.0" , "id" : 1 , "method" : "m" , "params" : null } x`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"n":123456789012345678901234567890,"e":-0.0e-0,"s":"<&>\u2028"}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeSimple(data)
		if !ok {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("%q: taken, but not valid JSON", data)
		}
		var ms map[string]json.RawMessage
		if err := json.Unmarshal(data, &ms); err != nil || ms["result"] != nil || ms["error"] != nil {
			t.Fatalf("%q: taken, but a response or no object (%v)", data, err)
		}
		want := request{Params: ms["params"]}
		if err := json.Unmarshal(ms["method"], &want.Method); err != nil {
			t.Fatalf("%q: taken, but encoding/json reads no method string: %v", data, err)
		}
		dec := json.NewDecoder(bytes.NewReader(ms["id"]))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%q: taken, but encoding/json reads no id: %v", data, err)
		}
		switch v := v.(type) {
		case string:
			want.ID = requestID{Str: v, IsString: true}
		case json.Number:
			n, err := strconv.ParseInt(v.String(), 10, 64)
			if err != nil || n < 0 {
				t.Fatalf("%q: taken with id %s, not an integer from 0 to 2^63-1", data, v)
			}
			want.ID = requestID{Num: uint64(n)}
		default:
			t.Fatalf("%q: taken with id %v, neither a string nor a number", data, v)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("%q:\ngot  %+v\nwant %+v", data, *got, want)
		}
	})
}

// FuzzStatusProviders: daemon.status's reply is json.Marshal's output
// whatever a provider's name holds (invalid UTF-8, control characters,
// backslashes, quotes, U+2028, HTML characters).
func FuzzStatusProviders(f *testing.F) {
	for _, s := range []string{"echo", "a\"b\\c", "\xff\xfe<&>\u2028\u2029\x00\x1f\x7f", "é\\u0031"} {
		f.Add(s, "/tmp/x\\\"\xff")
	}
	f.Fuzz(func(t *testing.T, name, path string) {
		o := ServerOptions{Version: name, Socket: path, StateDir: path + name}
		s := NewServer(o)
		raw := s.encodeStatus(api.SessionCounts{Stored: 2, Live: 1}, 3, []string{name, path})
		got := string(raw.buf[raw.off:])
		want, err := json.Marshal(Status{
			Version: o.Version, ProtocolVersion: api.ProtocolVersion, PID: os.Getpid(),
			StartedAt: o.StartedAt.UTC().Format(time.RFC3339Nano), Socket: o.Socket,
			StateDir: o.StateDir, Sessions: api.SessionCounts{Stored: 2, Live: 1},
			Connections: 3, Providers: []string{name, path}, Supervision: supervision(o.Supervision),
		})
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Fatalf("%q %q:\ngot  %s\nwant %s", name, path, got, want)
		}
	})
}
