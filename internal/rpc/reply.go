package rpc

import (
	"encoding/json"
	"strconv"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// Replies are encoded here, once, and written straight to the stream.
// jsonrpc2.Conn.Reply would marshal the result into a RawMessage, then
// marshal the Response (re-validating and compacting that RawMessage),
// then our stream would marshal the message again: three passes over what
// can be an 800 KB page of events. The bytes are those jsonrpc2 writes:
// {"id":…,"result":…,"jsonrpc":"2.0"} or {"id":…,"error":…,"jsonrpc":"2.0"}.

// rawResult is a result already encoded as compact JSON, exactly as
// json.Marshal would encode it.
type rawResult []byte

// replySlack is room left at the end of a reply for the stream's framing
// byte, so the line framing does not copy the body.
const replySlack = 1

// encodeResponse returns the response to id (nil: null) with result res
// (a rawResult is spliced as is; anything else goes through json.Marshal
// once) or, when werr is not nil, that error.
func encodeResponse(id *jsonrpc2.ID, res any, werr *jsonrpc2.Error) ([]byte, error) {
	var body []byte
	var err error
	switch {
	case werr != nil:
		body, err = json.Marshal(werr)
	default:
		if r, ok := res.(rawResult); ok {
			body = r
		} else {
			body, err = json.Marshal(res)
		}
	}
	if err != nil {
		return nil, err
	}
	idLen := 0
	if id != nil {
		idLen = len(id.Str)
	}
	b := make([]byte, 0, len(body)+48+idLen+replySlack)
	b = append(b, `{"id":`...)
	b = appendID(b, id)
	if werr != nil {
		b = append(b, `,"error":`...)
	} else {
		b = append(b, `,"result":`...)
	}
	b = append(b, body...)
	return append(b, `,"jsonrpc":"2.0"}`...), nil
}

// appendID appends id as jsonrpc2.ID.MarshalJSON writes it (nil: null).
func appendID(b []byte, id *jsonrpc2.ID) []byte {
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
	b := make([]byte, 0, eventsSize(r.Events)+64)
	b = append(b, `{"events":`...)
	b, err := event.AppendEvents(b, r.Events)
	if err != nil {
		return nil, err
	}
	return appendTail(b, r.LastSeq, r.HasMore), nil
}

// encodeAttach encodes agentSession.attach's result (events nil = []).
func encodeAttach(r api.AttachResult) (rawResult, error) {
	sess, err := json.Marshal(r.Session)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, eventsSize(r.Events)+len(sess)+len(r.SubscriptionID)+96)
	b = append(b, `{"subscriptionId":`...)
	b = event.AppendString(b, r.SubscriptionID)
	b = append(b, `,"session":`...)
	b = append(b, sess...)
	b = append(b, `,"events":`...)
	if b, err = event.AppendEvents(b, r.Events); err != nil {
		return nil, err
	}
	return appendTail(b, r.LastSeq, r.HasMore), nil
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
	b, err := event.AppendJSON(b, &n.Event)
	if err != nil {
		return nil, err
	}
	return append(b, `}}`...), nil
}
