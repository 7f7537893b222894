package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// oneShot is a jsonrpc2.ObjectStream that hands out one message, then EOF.
type oneShot struct {
	msg  []byte
	read bool
	err  chan error // the decode error jsonrpc2 met, or nil
}

func (s *oneShot) ReadObject(v any) error {
	if s.read {
		return io.EOF
	}
	s.read = true
	err := json.Unmarshal(s.msg, v)
	s.err <- err
	return err
}
func (s *oneShot) WriteObject(any) error { return nil }
func (s *oneShot) Close() error          { return nil }

// viaConn decodes msg as jsonrpc2.Conn decodes it: the request its handler
// sees, or the decode error.
func viaConn(t *testing.T, msg string) (*jsonrpc2.Request, error) {
	t.Helper()
	st := &oneShot{msg: []byte(msg), err: make(chan error, 1)}
	got := make(chan *jsonrpc2.Request, 1)
	h := jsonrpc2.HandlerWithError(func(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
		got <- r
		return nil, nil
	})
	jc := jsonrpc2.NewConn(context.Background(), st, h, jsonrpc2.SetLogger(discardLogger{}))
	<-jc.DisconnectNotify()
	if err := <-st.err; err != nil {
		return nil, err
	}
	select {
	case r := <-got:
		return r, nil
	default:
		return nil, nil // a response: ignored
	}
}

// paramsAsSent is the "params" member of msg as encoding/json reads it
// (the last one, its bytes as sent), or nil.
func paramsAsSent(msg []byte) json.RawMessage {
	var ms map[string]json.RawMessage
	if json.Unmarshal(msg, &ms) != nil {
		return nil
	}
	return ms["params"]
}

// sameRequest says how got, the read loop's request for msg, differs from
// want, jsonrpc2's ("" when it does not): the same method, id and
// notification; params present alike, kept as sent (the member's bytes),
// and the same JSON value as jsonrpc2's re-encoding of them.
func sameRequest(got *request, want *jsonrpc2.Request, msg []byte) string {
	switch {
	case got == nil || want == nil:
		return fmt.Sprintf("got %+v, want %+v", got, want)
	case got.Method != want.Method || got.Notif != want.Notif:
		return fmt.Sprintf("method/notif %q %v, want %q %v", got.Method, got.Notif, want.Method, want.Notif)
	case got.ID != (requestID{Num: want.ID.Num, Str: want.ID.Str, IsString: want.ID.IsString}):
		return fmt.Sprintf("id %+v, want %+v", got.ID, want.ID)
	case (got.Params == nil) != (want.Params == nil):
		return fmt.Sprintf("params %q, want %v", got.Params, want.Params)
	case got.Params != nil && !bytes.Equal(got.Params, paramsAsSent(msg)):
		return fmt.Sprintf("params %q, want them as sent: %q", got.Params, paramsAsSent(msg))
	case got.Params != nil && !sameJSON(got.Params, *want.Params):
		return fmt.Sprintf("params %q, jsonrpc2's %q: not the same value", got.Params, *want.Params)
	}
	return ""
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// TestDecodeLikeJSONRPC2: the read loop decodes each message as
// jsonrpc2.Conn did: same error or not, same request (method, id,
// notification, params of the same value, kept as sent), responses
// ignored. The
// id is the exception, on purpose (null, non-integer and negative ids):
// see TestIDEdgeCases; so is valid JSON that is no request, which
// jsonrpc2 refused (closing the connection) and the read loop answers
// -32600 (see TestInvalidRequestAnswered).
func TestDecodeLikeJSONRPC2(t *testing.T) {
	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"daemon.status"}`,
		`{"jsonrpc":"2.0","id":"x<y","method":"m","params":{"b":1,"a":[1.50,"<"],"a":2}}`,
		`{"jsonrpc":"2.0","id":3,"method":"m","params":null}`,
		`{"jsonrpc":"2.0","method":"m","params":[1,2]}`,
		`{"jsonrpc":"2.0","id":2,"method":"m","meta":{"t":1},"extra":"e"}`,
		`{"jsonrpc":"2.0","id":2,"method":"m","params":{"b":1,"a":[1.50,"<"],"a":2},"meta":{"t":1}}`,
		`{"jsonrpc":"2.0","id":"\u0031","method":"m","params": [ 1.0e1, "\u00e9" ] }`,
		`{"jsonrpc":"2.0","id":2,"method":7}`,
		`{"jsonrpc":"2.0","id":5,"result":{"x":1}}`,
		`{"jsonrpc":"2.0","id":5,"result":null}`,
		`{"jsonrpc":"2.0","id":5,"result":false}`,
		`{"jsonrpc":"2.0","id":5,"error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"m","result":1}`,
		`{"jsonrpc":"2.0","id":1}`,
		`{}`,
		`null`,
		`{"id":{"a":1},"result":1}`,
	}
	for _, msg := range msgs {
		t.Run(msg, func(t *testing.T) {
			want, werr := viaConn(t, msg)
			var m inMessage
			gerr := unmarshal([]byte(msg), &m)
			refused := gerr != nil || m.invalid != ""
			if (werr == nil) == refused {
				t.Fatalf("error %v (invalid %q), jsonrpc2's %v", gerr, m.invalid, werr)
			}
			if werr != nil {
				return
			}
			if want == nil { // a response: ignored
				if m.req != nil {
					t.Fatalf("a response read as the request %+v", m.req)
				}
				return
			}
			if d := sameRequest(m.req, want, []byte(msg)); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// TestIDEdgeCases: "id":null is a request answered with id null (jsonrpc2
// took it for a notification and never answered); an id that is valid
// JSON but neither a string nor an integer is answered -32600
// invalid_request with id null (jsonrpc2 closed the connection), and the
// connection goes on; in both framings.
func TestIDEdgeCases(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	for _, f := range framings {
		t.Run(f.String(), func(t *testing.T) {
			r := ts.raw(t, f)
			r.send(`{"jsonrpc":"2.0","id":null,"method":"daemon.status"}`)
			if m := r.recv(); m["id"] != nil || m["error"].(map[string]any)["code"] != -32002.0 {
				t.Fatalf("null id before initialize: %v", m)
			}
			r.initialize()
			for _, id := range []string{`true`, `{}`, `[1]`, `1.5`, `-1`, `1e3`, `9223372036854775808`, `123456789012345678901234567890`, `"x"`} {
				r.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"daemon.status"}`)
				m := r.recv()
				if id == `"x"` {
					if m["id"] != "x" || m["result"] == nil {
						t.Fatalf("string id: %v", m)
					}
					continue
				}
				e, _ := m["error"].(map[string]any)
				if _, has := m["id"]; !has || m["id"] != nil || e == nil || e["code"] != -32600.0 ||
					e["data"].(map[string]any)["reason"] != "invalid_request" {
					t.Fatalf("id %s: got %v, want -32600 invalid_request with id null", id, m)
				}
			}
			r.send(`{"jsonrpc":"2.0","id":null,"method":"daemon.status"}`)
			if m := r.recv(); m["id"] != nil || m["result"] == nil {
				t.Fatalf("null id: got %v, want a result with id null", m)
			}
			r.send(`{"jsonrpc":"2.0","method":"daemon.status"}`) // a notification: no answer
			r.send(`{"jsonrpc":"2.0","id":9223372036854775807,"method":"daemon.status"}`)
			if m := r.recvRaw(); !strings.HasPrefix(m, `{"id":9223372036854775807,"result":`) {
				t.Fatalf("largest id not echoed as sent: %.80s", m)
			}
			r.send(`{"jsonrpc":"2.0","id":9,"method":"daemon.status"}`)
			if m := r.recv(); m["id"] != 9.0 || m["result"] == nil {
				t.Fatalf("after the edge cases: %v", m)
			}
		})
	}
}

// TestInvalidRequestAnswered: valid JSON that is no request (JSON-RPC
// 2.0's "Invalid Request": not an object, no method, a method that is not
// a string, both a method and a result) is answered -32600
// invalid_request with id null, and the connection goes on; in both
// framings. jsonrpc2 closed the connection on each.
func TestInvalidRequestAnswered(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	for _, f := range framings {
		t.Run(f.String(), func(t *testing.T) {
			r := ts.raw(t, f)
			r.initialize()
			for _, msg := range []string{`{"jsonrpc":"2.0","id":1}`, `{"jsonrpc":"2.0","id":2,"method":7}`,
				`{"jsonrpc":"2.0","id":3,"method":null}`, `{}`, `5`, `"abc"`, `null`, `true`,
				`{"jsonrpc":"2.0","id":4,"method":"m","result":1}`} {
				r.send(msg)
				m := r.recv()
				e, _ := m["error"].(map[string]any)
				if _, has := m["id"]; !has || m["id"] != nil || e == nil || e["code"] != -32600.0 ||
					e["data"].(map[string]any)["reason"] != "invalid_request" {
					t.Fatalf("%s: got %v, want -32600 invalid_request with id null", msg, m)
				}
			}
			r.send(`{"jsonrpc":"2.0","id":9,"method":"daemon.status"}`)
			if m := r.recv(); m["id"] != 9.0 || m["result"] == nil {
				t.Fatalf("after the invalid requests: %v", m)
			}
		})
	}
}
