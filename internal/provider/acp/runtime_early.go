package acp

// Some agents write a session's first update before they answer the
// session/new that creates it (Copilot CLI 1.0.102 does, on every
// session/new): its sessionId is then no thread's yet. While a
// session/new of the runtime is in flight, such lines are held (at most
// maxEarlyLines, maxEarlyBytes); the thread whose session/new answer
// names the session gets them, in order, right after the answer and
// before any later line. Once no session/new is in flight, the lines
// nobody claimed are what they always were: an unknown session's
// (logged anomaly, delivered to nobody, a request refused).

// Bounds of the lines held for sessions not yet answered.
const (
	maxEarlyLines = 256
	maxEarlyBytes = 1 << 20
)

// earlyLine is a line held for a session not yet answered.
type earlyLine struct {
	sid  string
	m    routed
	line []byte
}

// holdEarly keeps line of session sid (no thread's) when a session/new is
// in flight and the bounds allow; false: it is an unknown session's.
func (r *Runtime) holdEarly(sid string, m *routed, line []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opening == 0 || len(r.early) >= maxEarlyLines || r.earlyBytes+len(line) > maxEarlyBytes {
		return false
	}
	r.early = append(r.early, earlyLine{sid: sid, m: *m, line: append([]byte(nil), line...)})
	r.earlyBytes += len(line)
	return true
}

// beginOpen counts a session/new about to be sent.
func (r *Runtime) beginOpen() {
	r.mu.Lock()
	r.opening++
	r.mu.Unlock()
}

// endOpen: a session/new's call ended (answered or not). When none is in
// flight any more, the lines held that no answer claimed are an unknown
// session's.
func (r *Runtime) endOpen() {
	r.mu.Lock()
	r.opening--
	var left []earlyLine
	if r.opening == 0 {
		left, r.early, r.earlyBytes = r.early, nil, 0
	}
	r.mu.Unlock()
	for _, e := range left {
		r.anomaly("unknown_session", "session_id", agentName(e.sid), "method", agentName(e.m.Method), "held", true)
		r.refuse(&e.m, codeInvalidParams, "no session of sessiond is on it")
	}
}

// claimEarly takes the lines held for sid (just bound), in order.
func (r *Runtime) claimEarly(sid string) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var mine [][]byte
	rest := r.early[:0]
	for _, e := range r.early {
		if e.sid == sid {
			mine = append(mine, e.line)
			r.earlyBytes -= len(e.line)
		} else {
			rest = append(rest, e)
		}
	}
	r.early = rest
	return mine
}
