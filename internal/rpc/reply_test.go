package rpc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// viaJSONRPC2 is what jsonrpc2.Conn.Reply and ReplyWithError made our
// stream write before replies were encoded here: SetResult, then the
// Response marshalled (our WriteObject's json.Marshal of the message).
func viaJSONRPC2(t *testing.T, id jsonrpc2.ID, res any, we *jsonrpc2.Error) []byte {
	t.Helper()
	resp := &jsonrpc2.Response{ID: id, Error: we}
	if we == nil {
		if err := resp.SetResult(res); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testEvents are events as the journal hands them out: each with its row
// as stored (Raw), data kept as it was handed in.
func testEvents() []event.Event {
	at := time.Date(2026, 11, 29, 10, 0, 0, 5, time.UTC)
	evs := []event.Event{
		{SessionID: "s_aaaaaaaa", Seq: 1, At: at, Type: event.SessionCreated},
		{SessionID: "s_aaaaaaaa", Seq: 2, At: at, Type: event.MessageDelta, TurnID: "t_1", Data: json.RawMessage(`{"text":"a <b> & c"}`)},
		{SessionID: "s_aaaaaaaa", Seq: 3, At: at, Type: event.MessageDelta, TurnID: "t_1", Data: json.RawMessage("{ \"text\": \"x\" }")},
		{SessionID: "s_aaaaaaaa", Seq: 4, At: at, Type: event.TurnCompleted, Data: json.RawMessage(`{"status":"completed"}`)},
	}
	for i := range evs {
		evs[i].Raw = event.AppendJSON(nil, &evs[i])
	}
	return evs
}

// sameJSON: a and b decode to the same value (the stored rows keep their
// data's own spelling, where jsonrpc2 compacted and HTML-escaped it).
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// splicesRows: every event's stored row appears in out as is.
func splicesRows(out []byte, evs []event.Event) bool {
	for _, ev := range evs {
		if !bytes.Contains(out, ev.Raw) {
			return false
		}
	}
	return true
}

// TestRepliesMatchJSONRPC2: every reply is byte for byte what jsonrpc2's
// reply path wrote (plain results, errors, string and number ids), except
// that the hand-encoded read and attach results splice the events' stored
// rows: the same JSON values, the rows as stored.
func TestRepliesMatchJSONRPC2(t *testing.T) {
	evs := testEvents()
	rel := time.Date(2026, 11, 29, 10, 0, 1, 0, time.UTC)
	read := api.ReadResult{Events: evs, LastSeq: 4, HasMore: true}
	att := api.AttachResult{SubscriptionID: "sub<1>", Session: api.SessionInfo{SessionID: "s_aaaaaaaa", Holders: []string{"h"}, ReleaseAt: &rel},
		Events: evs[:2], LastSeq: 2}
	rawRead, err := encodeRead(read)
	if err != nil {
		t.Fatal(err)
	}
	rawAtt, err := encodeAttach(att)
	if err != nil {
		t.Fatal(err)
	}
	rawEmpty, err := encodeRead(api.ReadResult{})
	if err != nil {
		t.Fatal(err)
	}
	data := json.RawMessage(`{"reason":"x"}`)
	// The last id is longer than the room a raw result keeps for the head.
	ids := []jsonrpc2.ID{{Num: 7}, {Str: "a\"b<", IsString: true}, {IsString: true}, {Str: strings.Repeat("i", rawHead), IsString: true}}
	tests := []struct {
		name string
		res  any // what jsonrpc2 was given
		raw  any // what writeResponse is given (nil: res)
		we   *jsonrpc2.Error
		evs  []event.Event // spliced rows
	}{
		{name: "status", res: Status{Version: "v<1>", Providers: []string{}}},
		{name: "empty object", res: struct{}{}},
		{name: "nil result", res: nil},
		{name: "read", res: read, raw: rawRead, evs: evs},
		{name: "read nothing", res: api.ReadResult{Events: []event.Event{}}, raw: rawEmpty},
		{name: "attach", res: att, raw: rawAtt, evs: evs[:2]},
		{name: "error", we: &jsonrpc2.Error{Code: -32602, Message: "bad <param>", Data: &data}},
		{name: "error without data", we: &jsonrpc2.Error{Code: -32601, Message: "no"}},
	}
	for _, tt := range tests {
		for _, id := range ids {
			t.Run(tt.name+"/"+id.String(), func(t *testing.T) {
				want := viaJSONRPC2(t, id, tt.res, tt.we)
				in := tt.raw
				if in == nil {
					in = tt.res
				}
				rid := requestID{Num: id.Num, Str: id.Str, IsString: id.IsString}
				got, err := encodeResponse(&rid, in, (*errorObject)(tt.we))
				if err != nil {
					t.Fatal(err)
				}
				if tt.evs != nil {
					if !sameJSON(got, want) || !splicesRows(got, tt.evs) {
						t.Fatalf("got  %s\nwant %s (rows spliced as stored)", got, want)
					}
					return
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("got  %s\nwant %s", got, want)
				}
			})
		}
	}
}

// TestEventNoticeMatchesMarshal: the hand-encoded agentSession.event is
// what notify (json.Marshal of the notification) writes, with the event's
// stored row spliced in.
func TestEventNoticeMatchesMarshal(t *testing.T) {
	for _, ev := range testEvents() {
		n := api.EventNotice{SubscriptionID: "sub_1", Event: ev}
		want, err := json.Marshal(notification{JSONRPC: "2.0", Method: NotifyEvent, Params: n})
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeEventNotice(n)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(got, want) || !splicesRows(got, []event.Event{ev}) {
			t.Fatalf("seq %d: got  %s\nwant %s", ev.Seq, got, want)
		}
	}
}
