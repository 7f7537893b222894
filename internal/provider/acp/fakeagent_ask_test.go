package acp

import (
	"fmt"
	"strconv"
)

// The fake agent's side of the exchanges it starts (a request to the
// client and its answer, matched by id, so the prompts of several
// sessions in one process can each wait for theirs), its per-session
// state, and the helpers its prompts use to read answers.

// ask sends a request to the client and waits for its answer.
func (f *fakeAgent) ask(method string, params map[string]any) map[string]any {
	f.outMu.Lock()
	f.nextID++
	id := f.nextID
	f.outMu.Unlock()
	w := make(chan map[string]any, 1)
	sid, _ := params["sessionId"].(string)
	f.sessMu.Lock()
	f.waiters[id], f.askSID[id] = w, sid
	f.sessMu.Unlock()
	f.write(map[string]any{"id": id, "method": method, "params": params})
	r, ok := <-w
	if !ok {
		return nil
	}
	return r
}

// gathered is closed once n gather prompts have arrived (the caller's
// included).
func (f *fakeAgent) gathered(n int) chan struct{} {
	f.sessMu.Lock()
	defer f.sessMu.Unlock()
	if f.gather == nil {
		f.gather = make(chan struct{})
	}
	f.gatherN++
	if f.gatherN == n {
		close(f.gather)
	}
	return f.gather
}

// cancelOf is the cancel of sid's running prompt (nil: none yet).
func (f *fakeAgent) cancelOf(sid string) chan struct{} {
	f.sessMu.Lock()
	defer f.sessMu.Unlock()
	return f.cancels[sid]
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func permissionOptions() []any {
	return []any{
		map[string]any{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
		map[string]any{"optionId": "always", "name": "Always", "kind": "allow_always"},
		map[string]any{"optionId": "no", "name": "Reject", "kind": "reject_once"},
	}
}

func mergeMap(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// outcomeOf is a permission answer's optionId, "cancelled", or "error".
func outcomeOf(r map[string]any) string {
	res, _ := r["result"].(map[string]any)
	o, _ := res["outcome"].(map[string]any)
	switch o["outcome"] {
	case "selected":
		s, _ := o["optionId"].(string)
		return s
	case "cancelled":
		return "cancelled"
	}
	return "error"
}

// answerText is an answer's error code, or "ok".
func answerText(r map[string]any) string {
	if e, ok := r["error"].(map[string]any); ok {
		return fmt.Sprintf("%v", e["code"])
	}
	return "ok"
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
