package rpc

import (
	"encoding/json"
	"strconv"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// Replies are encoded here, once, and written straight to the stream.
// Events are spliced in as the journal stored them (event.Event.Raw): a
// page is copied, never decoded and re-encoded.
// jsonrpc2.Conn.Reply would marshal the result into a RawMessage, then
// marshal the Response (re-validating and compacting that RawMessage),
// then our stream would marshal the message again: three passes over what
// can be an 800 KB page of events. The bytes are those jsonrpc2 writes:
// {"id":…,"result":…,"jsonrpc":"2.0"} or {"id":…,"error":…,"jsonrpc":"2.0"}.

// rawResult is a result already encoded as JSON. buf[off:] is the result;
// buf[:off] is room for the response's head ({"id":…,"result":), written
// in place so that a large page is not copied once more to put it in
// front; cap(buf) leaves room for the tail.
type rawResult struct {
	buf []byte
	off int
	// release, when set, runs once the reply is counted in the outbound
	// budget or dropped (list.go's gate).
	release func()
	// pooled: buf came from pooledRaw and goes back once the reply is
	// written or dropped (replybuf.go).
	pooled bool
}

// replySlack is room left at the end of a reply for the stream's framing
// byte, so the line framing does not copy the body.
const replySlack = 1

// Room around a rawResult: the head with a number id or a string id of up
// to 40 bytes; the tail and the framing byte.
const (
	rawHead = 64
	rawTail = len(`,"jsonrpc":"2.0"}`) + replySlack
)

// newRaw starts a rawResult's buffer for a result of about size bytes.
func newRaw(size int) []byte {
	return make([]byte, rawHead, rawHead+size+rawTail)
}

// encodeResponse returns the response to id (nil: null) with result res
// (a rawResult is spliced as is; anything else goes through json.Marshal
// once) or, when werr is not nil, that error.
func encodeResponse(id *requestID, res any, werr *errorObject) ([]byte, error) {
	var body []byte
	var err error
	switch r, raw := res.(rawResult); {
	case werr != nil:
		body, err = json.Marshal(werr)
	case raw:
		var h [rawHead]byte
		head := appendHead(h[:0], id, false)
		if len(head) <= r.off {
			b := r.buf[r.off-len(head):]
			copy(b, head)
			return append(b, `,"jsonrpc":"2.0"}`...), nil
		}
		body = r.buf[r.off:]
	default:
		body, err = json.Marshal(res)
	}
	if err != nil {
		return nil, err
	}
	idLen := 0
	if id != nil {
		idLen = len(id.Str)
	}
	b := make([]byte, 0, len(body)+48+idLen+replySlack)
	b = appendHead(b, id, werr != nil)
	b = append(b, body...)
	return append(b, `,"jsonrpc":"2.0"}`...), nil
}

// appendHead appends {"id":<id>,"result": (or "error").
func appendHead(b []byte, id *requestID, isErr bool) []byte {
	b = append(b, `{"id":`...)
	b = appendID(b, id)
	if isErr {
		return append(b, `,"error":`...)
	}
	return append(b, `,"result":`...)
}

// appendID appends id as it was read (nil: null), as jsonrpc2.ID.MarshalJSON
// wrote it.
func appendID(b []byte, id *requestID) []byte {
	if id == nil {
		return append(b, "null"...)
	}
	if id.IsString {
		return event.AppendString(b, id.Str)
	}
	return strconv.AppendUint(b, id.Num, 10)
}

// encodeRead encodes agentSession.read's result (events nil = []).
func encodeRead(r api.ReadResult) (rawResult, error) {
	b := pooledRaw(eventsSize(r.Events) + 64)
	b = append(b, `{"events":`...)
	b = event.AppendEvents(b, r.Events)
	return rawResult{buf: appendTail(b, r.LastSeq, r.HasMore), off: rawHead, pooled: true}, nil
}

// encodeAttach encodes agentSession.attach's result (events nil = []).
func encodeAttach(r api.AttachResult) (rawResult, error) {
	sess, err := json.Marshal(r.Session)
	if err != nil {
		return rawResult{}, err
	}
	b := pooledRaw(eventsSize(r.Events) + len(sess) + len(r.SubscriptionID) + 96)
	b = append(b, `{"subscriptionId":`...)
	b = event.AppendString(b, r.SubscriptionID)
	b = append(b, `,"session":`...)
	b = append(b, sess...)
	b = append(b, `,"events":`...)
	b = event.AppendEvents(b, r.Events)
	return rawResult{buf: appendTail(b, r.LastSeq, r.HasMore), off: rawHead, pooled: true}, nil
}

func appendTail(b []byte, lastSeq uint64, hasMore bool) []byte {
	b = append(b, `,"lastSeq":`...)
	b = strconv.AppendUint(b, lastSeq, 10)
	b = append(b, `,"hasMore":`...)
	b = strconv.AppendBool(b, hasMore)
	return append(b, '}')
}

func eventsSize(evs []event.Event) int {
	n := 2
	for i := range evs {
		n += event.EncodedSize(&evs[i]) + 1
	}
	return n
}

// encodeEventNotice encodes an agentSession.event notification.
func encodeEventNotice(n api.EventNotice) ([]byte, error) {
	b := make([]byte, 0, event.EncodedSize(&n.Event)+len(n.SubscriptionID)+96+replySlack)
	b = append(b, `{"jsonrpc":"2.0","method":"`+NotifyEvent+`","params":{"subscriptionId":`...)
	b = event.AppendString(b, n.SubscriptionID)
	b = append(b, `,"event":`...)
	b = event.AppendJSON(b, &n.Event)
	return append(b, `}}`...), nil
}
