package rpc

import (
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestDecodeSimpleLikeJSONRPC2: whenever the hand-written decoder takes a
// message (decodeSimple), jsonrpc2.Conn decodes it without error to the
// same request (method, id, params of the same value, which decodeSimple
// keeps as sent; no meta, no extra fields), and so does the general path
// (decodeRequest); the
// messages are built from members that fit the simple shape and members
// that do not, in any order, with or without white space, a member
// sometimes twice.
func TestDecodeSimpleLikeJSONRPC2(t *testing.T) {
	ws := []string{"", " ", "\t", "\r\n", "  \n "}
	members := map[string][]string{
		"jsonrpc": {`"2.0"`, `"1.0"`, `""`, `2`, `null`, `"2\u002e0"`},
		"id":      {`0`, `7`, `42`, `999999999999999999`, `1000000000000000000`, `9223372036854775807`, `007`, `-1`, `1.5`, `1e3`, `null`, `"x"`, `""`, `"a b<&>"`, `"é"`, `"a\"b"`, `true`, `{}`},
		"method":  {`"daemon.status"`, `"agentSession.list"`, `""`, `"a\u0062"`, `"ü"`, `7`, `null`},
		"params": {`{}`, `{"sessionId":"s_aaaaaaaa","holderId":"h","ttlMs":1.50e3}`, `{ }`, `[]`, `[1,"<&>"]`, `null`,
			`"s"`, `7`, `{"a":"x\"}]{[y","b":[1.50,{"c":null}],"a":2,"é\u00e9":"\ud800"}`, `{"a":1,}`, `{"a":[1}`, `{"a":"\q"}`,
			`{"a":1} {"b":2}`, `{"n":123456789012345678901234567890,"e":-0.0e-0}`},
		"meta":   {`{"t":1}`},
		"extra":  {`"e"`},
		"Method": {`"daemon.status"`},
	}
	names := []string{"jsonrpc", "id", "method", "params", "meta", "extra", "Method"}
	simple := 0
	check := func(t *rapid.T) {
		sp := func() string { return rapid.SampledFrom(ws).Draw(t, "ws") }
		var ms []string
		for _, n := range names {
			in := rapid.IntRange(0, 9).Draw(t, "in")
			switch n {
			case "jsonrpc", "id", "method", "params":
				if in == 0 { // the simple shape's members, usually
					continue
				}
			default:
				if in != 0 {
					continue
				}
			}
			times := 1
			if rapid.IntRange(0, 9).Draw(t, "twice") == 0 {
				times = 2
			}
			for k := times; k > 0; k-- {
				pool := members[n]
				if rapid.Bool().Draw(t, "first") {
					pool = pool[:1] // the usual value, often
				}
				v := rapid.SampledFrom(pool).Draw(t, n)
				ms = append(ms, sp()+`"`+n+`"`+sp()+":"+sp()+v+sp())
			}
		}
		perm := rapid.Permutation(ms).Draw(t, "order")
		msg := sp() + "{" + strings.Join(perm, ",") + "}" + sp()
		got, ok := decodeSimple([]byte(msg))
		if !ok {
			return
		}
		simple++
		want, err := viaConn(&testing.T{}, msg)
		if err != nil || want == nil {
			t.Fatalf("%s: taken by decodeSimple as %+v; jsonrpc2: %+v, %v", msg, got, want, err)
		}
		if want.Meta != nil || len(want.ExtraFields) > 0 {
			t.Fatalf("%s: taken by decodeSimple, but jsonrpc2 found meta or extra fields: %+v", msg, want)
		}
		if d := sameRequest(got, want, []byte(msg)); d != "" {
			t.Fatalf("%s: %s", msg, d)
		}
		if general, err := decodeRequest([]byte(msg)); err != nil || !reflect.DeepEqual(general, got) {
			t.Fatalf("%s:\ngot     %+v\ngeneral %+v, %v", msg, got, general, err)
		}
	}
	for range 10 {
		rapid.Check(t, check)
	}
	t.Logf("%d simple", simple)
	if simple == 0 {
		t.Fatal("no generated message was of the simple shape")
	}
}
