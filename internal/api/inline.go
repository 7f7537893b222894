package api

// InlineBackend is a Backend that can answer a hold or a release at once
// when it need not wait: the session live, its lock free, nothing to
// start or tear down. rpc then answers the call on the connection's
// reading goroutine instead of handing it to a queue's worker (a
// goroutine hop each way). ok false: it would wait; the call is queued
// as usual and Hold or Release answers it.
type InlineBackend interface {
	HoldNow(conn string, p HoldParams) (res HoldResult, ok bool, err error)
	ReleaseNow(conn string, p ReleaseParams) (res ReleaseResult, ok bool, err error)
}
