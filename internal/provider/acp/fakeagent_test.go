package acp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The fake ACP agent: this test binary re-executed with ACP_FAKE_AGENT set
// (to a mode of the whole process: "", "badversion", "silent", "noload",
// "banner"). What it does in a turn is chosen by the prompt's first word
// (fakeAgent.prompt). It writes newline-delimited JSON-RPC on stdout, as a
// real agent does.

const fakeEnv = "ACP_FAKE_AGENT"

type fakeAgent struct {
	mode   string
	outMu  sync.Mutex
	in     chan map[string]any
	nextID int
	nsess  int
	cancel chan struct{} // a session/cancel arrived for the last prompt
	// Several sessions in one process (a shared runtime): each session's
	// prompt has its cancel, each request of ours its waiter.
	sessMu  sync.Mutex
	cancels map[string]chan struct{} // sessionId -> its running prompt's cancel
	waiters map[int]chan map[string]any
	askSID  map[int]string // our request id -> the session it asked for
	gather  chan struct{}  // closed when gatherN reached the number a gather prompt names
	gatherN int
	replies chan map[string]any
	noread  atomic.Bool // stop reading stdin (the next line read is the last)
}

func runFakeAgent(mode string) {
	f := &fakeAgent{mode: mode, in: make(chan map[string]any, 64), replies: make(chan map[string]any, 64),
		cancels: map[string]chan struct{}{}, waiters: map[int]chan map[string]any{}, askSID: map[int]string{}}
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if f.noread.Load() {
				select {} // reads no more: our stdin fills
			}
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				f.in <- m
			}
		}
		close(f.in)
	}()
	if mode == "banner" {
		f.line("fake agent 1.0 starting")
	}
	for m := range f.in {
		f.handle(m)
	}
}

func (f *fakeAgent) line(s string) {
	f.outMu.Lock()
	defer f.outMu.Unlock()
	os.Stdout.WriteString(s + "\n")
}

func (f *fakeAgent) write(v map[string]any) {
	v["jsonrpc"] = "2.0"
	b, _ := json.Marshal(v)
	f.line(string(b))
}

func (f *fakeAgent) result(id any, r any) { f.write(map[string]any{"id": id, "result": r}) }

func (f *fakeAgent) update(sid string, u map[string]any) {
	f.write(map[string]any{"method": "session/update", "params": map[string]any{"sessionId": sid, "update": u}})
}

func chunk(kind, text string) map[string]any {
	return map[string]any{"sessionUpdate": kind, "content": map[string]any{"type": "text", "text": text}}
}

func (f *fakeAgent) handle(m map[string]any) {
	id := m["id"]
	p, _ := m["params"].(map[string]any)
	if phase, ok := strings.CutPrefix(f.mode, "closeout:"); ok && m["method"] == phase {
		// stdout closed as the request of that phase arrives, unanswered;
		// the agent runs on (reading its stdin) until it is stopped.
		f.outMu.Lock()
		os.Stdout.Close()
		f.outMu.Unlock()
		return
	}
	switch m["method"] {
	case "initialize":
		switch f.mode {
		case "silent":
			return
		case "badversion":
			f.result(id, map[string]any{"protocolVersion": 2, "agentCapabilities": map[string]any{}, "authMethods": []any{}})
			return
		case "manyauth": // 2000 authMethods with 1000-byte ids
			ams := make([]any, 2000)
			for i := range ams {
				ams[i] = map[string]any{"id": fmt.Sprintf("%04d", i) + strings.Repeat("m", 996), "name": "M"}
			}
			f.result(id, map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": ams})
			return
		case "initerr": // initialize answered with a 1 MiB error message
			f.write(map[string]any{"id": id, "error": map[string]any{"code": -32000, "message": strings.Repeat("E", 1<<20)}})
			return
		}
		caps := map[string]any{"loadSession": f.mode != "noload"}
		if f.mode != "noclose" {
			caps["sessionCapabilities"] = map[string]any{"close": map[string]any{}}
		}
		f.result(id, map[string]any{"protocolVersion": 1, "agentCapabilities": caps,
			"authMethods": []any{map[string]any{"id": "key", "name": "Key"}}})
	case "authenticate":
		f.result(id, map[string]any{})
	case "session/new":
		if f.mode == "nonew" {
			return // never answered
		}
		f.nsess++
		sid := fmt.Sprintf("sess-%d", f.nsess)
		if f.mode == "samenew" { // every session/new answered with the same sessionId
			sid = "sess-1"
		}
		if f.mode == "early" { // updates before the answer: one of the new session (as Copilot CLI does), one of a session never created
			f.update(sid, map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{}})
			f.update("ghost", map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{}})
		}
		f.result(id, map[string]any{"sessionId": sid})
		f.update(sid, map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{}})
	case "session/load":
		sid, _ := p["sessionId"].(string)
		if sid == "gone" {
			f.write(map[string]any{"id": id, "error": map[string]any{"code": -32002, "message": "Resource not found: " + sid}})
			return
		}
		// the history, replayed before the answer
		f.update(sid, chunk("user_message_chunk", "earlier question"))
		f.update(sid, chunk("agent_message_chunk", "earlier answer"))
		f.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "old-1", "title": "ls", "kind": "execute", "status": "completed"})
		if sid == "asks" { // a permission asked during the load (its answer is not awaited)
			f.outMu.Lock()
			f.nextID++
			pid := f.nextID
			f.outMu.Unlock()
			f.write(map[string]any{"id": pid, "method": "session/request_permission", "params": map[string]any{"sessionId": sid,
				"toolCall": map[string]any{"toolCallId": "load-1", "title": "rm", "kind": "delete"}, "options": permissionOptions()}})
		}
		f.result(id, map[string]any{})
	case "session/prompt":
		sid, _ := p["sessionId"].(string)
		text := ""
		if pr, ok := p["prompt"].([]any); ok && len(pr) > 0 {
			text, _ = pr[0].(map[string]any)["text"].(string)
		}
		f.cancel = make(chan struct{})
		f.sessMu.Lock()
		f.cancels[sid] = f.cancel
		f.sessMu.Unlock()
		go f.prompt(id, sid, text)
	case "session/close": // the session's work cancelled, the session forgotten (it can be loaded again)
		sid, _ := p["sessionId"].(string)
		if c := f.cancelOf(sid); c != nil && !isClosed(c) {
			close(c)
		}
		f.result(id, map[string]any{})
	case "session/cancel":
		sid, _ := p["sessionId"].(string)
		if c := f.cancelOf(sid); c != nil && !isClosed(c) {
			close(c)
		}
	default:
		if id != nil && m["method"] == nil {
			n, _ := id.(float64)
			f.sessMu.Lock()
			w, c := f.waiters[int(n)], f.cancels[f.askSID[int(n)]]
			f.sessMu.Unlock()
			m["cancelSeen"] = c != nil && isClosed(c) // in wire order: did session/cancel come first (for its session)?
			if w != nil {
				w <- m
				return
			}
			select {
			case f.replies <- m:
			default: // answers to requests nobody awaits (a flood)
			}
		}
	}
}

// prompt plays one turn, chosen by the prompt's first word.
func (f *fakeAgent) prompt(id any, sid, text string) {
	cancel := f.cancelOf(sid)
	words := strings.Fields(text)
	if len(words) == 0 {
		words = []string{"hello"}
	}
	stop := "end_turn"
	end := map[string]any{}
	switch words[0] {
	case "hello":
		f.update(sid, chunk("agent_message_chunk", "Hel"))
		f.update(sid, chunk("agent_message_chunk", "lo"))
		f.update(sid, map[string]any{"sessionUpdate": "usage_update", "used": 1200, "size": 200000})
		end["usage"] = map[string]any{"inputTokens": 10, "outputTokens": 2, "totalTokens": 12}
	case "work", "deny-ends":
		f.update(sid, chunk("agent_thought_chunk", "thinking"))
		f.update(sid, map[string]any{"sessionUpdate": "plan", "entries": []any{
			map[string]any{"content": "run it", "priority": "high", "status": "in_progress"}}})
		call := map[string]any{"toolCallId": "call-1", "title": "touch done", "kind": "execute", "status": "pending",
			"rawInput": map[string]any{"command": []any{"bash", "-lc", "touch done"}, "cwd": "/tmp"}}
		f.update(sid, mergeMap(map[string]any{"sessionUpdate": "tool_call"}, call))
		r := f.ask("session/request_permission", map[string]any{"sessionId": sid, "toolCall": call, "options": permissionOptions()})
		outcome := outcomeOf(r)
		if outcome != "cancelled" && outcome != "error" && r["cancelSeen"] == true {
			outcome = "SELECTED-AFTER-CANCEL" // session/cancel came first, then a selected answer
		}
		f.update(sid, chunk("agent_message_chunk", "outcome="+outcome))
		switch {
		case outcome == "yes" || outcome == "always":
			f.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "in_progress",
				"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "out1\n"}}}})
			f.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed",
				"content":   []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "out1\nout2\n"}}},
				"rawOutput": map[string]any{"exit_code": 0}})
		case outcome == "cancelled":
			stop = "cancelled"
		default:
			f.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "failed"})
			if words[0] == "deny-ends" {
				stop = "cancelled"
			}
		}
	case "slow":
		for i := 0; !isClosed(cancel); i++ {
			f.update(sid, chunk("agent_message_chunk", "x"))
			select {
			case <-cancel:
			case <-time.After(10 * time.Millisecond):
			}
		}
		stop = "cancelled"
	case "hang": // ignores session/cancel
		<-make(chan struct{})
	case "noopts", "badopts", "othersession", "permcollide":
		call := map[string]any{"toolCallId": "call-2", "title": "rm", "kind": "delete"}
		opts := []any{}
		if words[0] == "badopts" {
			opts = []any{map[string]any{"optionId": "", "name": "?", "kind": "allow_once"},
				map[string]any{"optionId": "x", "name": "?", "kind": "maybe"}}
		}
		if words[0] == "permcollide" {
			opts = []any{map[string]any{"optionId": "same", "name": "Reject", "kind": "reject_once"},
				map[string]any{"optionId": "same", "name": "Allow", "kind": "allow_once"}}
		}
		ps := sid
		if words[0] == "othersession" {
			ps, opts = "other", permissionOptions()
		}
		r := f.ask("session/request_permission", map[string]any{"sessionId": ps, "toolCall": call, "options": opts})
		f.update(sid, chunk("agent_message_chunk", "answer="+answerText(r)))
	case "gather": // "gather N tag": held until N gather prompts run at once (any sessions), then "reply-tag" in three chunks
		n, _ := strconv.Atoi(words[1])
		<-f.gathered(n)
		for _, c := range []string{"reply-", words[2][:len(words[2])/2], words[2][len(words[2])/2:]} {
			f.update(sid, chunk("agent_message_chunk", c))
		}
	case "cross": // "cross SID": an update tagged with session SID, one and a permission request tagged with no session of ours, then "mine"
		f.update(words[1], chunk("agent_message_chunk", "for-"+words[1]))
		f.update("nobody", chunk("agent_message_chunk", "for-nobody"))
		r := f.ask("session/request_permission", map[string]any{"sessionId": "nobody",
			"toolCall": map[string]any{"toolCallId": "x-1", "title": "rm", "kind": "delete"}, "options": permissionOptions()})
		f.update(sid, chunk("agent_message_chunk", "mine;nobody-perm="+answerText(r)))
	case "unknown-session":
		f.update("other", chunk("agent_message_chunk", "not yours"))
		f.update(sid, chunk("agent_message_chunk", "mine"))
	case "flood":
		n, _ := strconv.Atoi(words[1])
		for i := 0; i < n; i++ {
			f.update(sid, chunk("agent_message_chunk", "y"))
		}
	case "big": // 2 MiB of text, then a command printing 100 KiB
		for range 32 {
			f.update(sid, chunk("agent_message_chunk", strings.Repeat("t", 64<<10)))
		}
		f.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "b1", "title": "yes", "kind": "execute", "status": "in_progress",
			"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": strings.Repeat("o", 100<<10)}}}})
		f.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "b1", "status": "completed"})
		f.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "b2", "title": "yes", "kind": "execute", "status": "in_progress"})
		f.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "b2", "status": "failed",
			"rawOutput": map[string]any{"exit_code": 3, "formatted_output": strings.Repeat("r", 100<<10)}})
		f.update(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "image", "data": "AA==", "mimeType": "image/png"}})
	case "bigids": // completed calls with long ids, then a permission for an open one
		for i := range 40 {
			cid := fmt.Sprintf("%d-%s", i, strings.Repeat("i", 200<<10))
			f.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": cid, "title": "ls", "kind": "execute", "status": "in_progress"})
			f.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": cid, "status": "completed"})
		}
		call := map[string]any{"toolCallId": "open-" + strings.Repeat("i", 200<<10), "title": "rm", "kind": "delete", "status": "pending"}
		f.update(sid, mergeMap(map[string]any{"sessionUpdate": "tool_call"}, call))
		r := f.ask("session/request_permission", map[string]any{"sessionId": sid, "toolCall": call, "options": permissionOptions()})
		f.update(sid, chunk("agent_message_chunk", "outcome="+outcomeOf(r)))
	case "noread": // n requests (ids padded to size bytes), then stdin is no longer read, the prompt never answered
		f.noread.Store(true)
		n, _ := strconv.Atoi(words[1])
		size := 0
		if len(words) > 2 {
			size, _ = strconv.Atoi(words[2])
		}
		for i := range n {
			rid := fmt.Sprintf("r-%d-", i)
			rid += strings.Repeat("p", max(0, size-len(rid)))
			f.write(map[string]any{"id": rid, "method": "fs/read_text_file", "params": map[string]any{"sessionId": sid, "path": "/etc/hostname"}})
		}
		f.update(sid, chunk("agent_message_chunk", "flooded"))
		<-make(chan struct{})
	case "closeout": // one chunk, then stdout closed while the agent runs on
		f.update(sid, chunk("agent_message_chunk", "bye"))
		f.outMu.Lock()
		os.Stdout.Close()
		f.outMu.Unlock()
		<-make(chan struct{})
	case "cancelstream": // runs to our cancel, answers it, then streams on and asks a permission
		<-cancel
		f.result(id, map[string]any{"stopReason": "cancelled"})
		f.update(sid, chunk("agent_message_chunk", "still going"))
		call := map[string]any{"toolCallId": "late-1", "title": "rm", "kind": "delete"}
		f.ask("session/request_permission", map[string]any{"sessionId": sid, "toolCall": call, "options": permissionOptions()})
		return
	case "permflood": // n permission requests, none awaited
		n, _ := strconv.Atoi(words[1])
		for i := range n {
			f.write(map[string]any{"id": fmt.Sprintf("p-%d", i), "method": "session/request_permission", "params": map[string]any{"sessionId": sid,
				"toolCall": map[string]any{"toolCallId": fmt.Sprintf("pc-%d", i), "title": "rm", "kind": "delete"}, "options": permissionOptions()}})
		}
		f.update(sid, chunk("agent_message_chunk", "sent"))
		<-cancel
		stop = "cancelled"
	case "fattools": // 40 open calls of about 60 KB each, never completed
		for i := range 40 {
			f.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": fmt.Sprintf("f%d", i), "title": "ls", "kind": "execute",
				"status": "in_progress", "rawInput": map[string]any{"command": strings.Repeat("x", 60<<10)}})
		}
		f.update(sid, chunk("agent_message_chunk", "done"))
	case "fatupdates": // 40 small open calls, each then updated with 64 KB of output; the turn stays open
		for i := range 40 {
			f.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": fmt.Sprintf("u%d", i), "title": "ls", "kind": "execute",
				"status": "in_progress"})
		}
		for i := range 40 {
			f.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": fmt.Sprintf("u%d", i), "status": "in_progress",
				"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": strings.Repeat("o", 64<<10)}}}})
		}
		f.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "u39", "status": "completed"})
		f.update(sid, chunk("agent_message_chunk", "done"))
		<-cancel
		stop = "cancelled"
	case "permbytes": // n permission requests with 1000-byte ids and optionIds, none awaited
		n, _ := strconv.Atoi(words[1])
		for i := range n {
			pad := strings.Repeat("p", 990)
			opts := []any{map[string]any{"optionId": fmt.Sprintf("y%d%s", i, pad), "name": "Allow", "kind": "allow_once"},
				map[string]any{"optionId": fmt.Sprintf("a%d%s", i, pad), "name": "Always", "kind": "allow_always"},
				map[string]any{"optionId": fmt.Sprintf("n%d%s", i, pad), "name": "Reject", "kind": "reject_once"}}
			if i == 0 {
				opts = append(opts, map[string]any{"optionId": strings.Repeat("L", 2000), "name": "Long", "kind": "allow_once"})
			}
			f.write(map[string]any{"id": fmt.Sprintf("p-%d-%s", i, pad), "method": "session/request_permission", "params": map[string]any{"sessionId": sid,
				"toolCall": map[string]any{"toolCallId": fmt.Sprintf("pc-%d", i), "title": "rm", "kind": "delete"}, "options": opts}})
		}
		f.update(sid, chunk("agent_message_chunk", "sent"))
		<-cancel
		stop = "cancelled"
	case "manysteps": // a plan of 300 steps of 4 KB, an edit of 300 diffs and 300 locations
		var entries, diffs, locs []any
		for i := range 300 {
			entries = append(entries, map[string]any{"content": fmt.Sprintf("%d%s", i, strings.Repeat("s", 4200)), "priority": "low", "status": "pending"})
			diffs = append(diffs, map[string]any{"type": "diff", "path": fmt.Sprintf("/w/%d", i), "oldText": "a\n", "newText": "b\n"})
			locs = append(locs, map[string]any{"path": fmt.Sprintf("/w/%d%s", i, strings.Repeat("l", 4200))})
		}
		f.update(sid, map[string]any{"sessionUpdate": "plan", "entries": entries})
		f.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "m1", "title": "Edit", "kind": "edit", "status": "in_progress",
			"locations": locs})
		f.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "m2", "title": "Move", "kind": "move", "status": "in_progress",
			"locations": locs})
		f.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "m1", "status": "completed", "content": diffs})
		f.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "m2", "status": "completed"})
	case "reuse": // a permission request id reused while open, an answer to no request, the prompt answered twice
		req := map[string]any{"id": "dup", "method": "session/request_permission", "params": map[string]any{"sessionId": sid,
			"toolCall": map[string]any{"toolCallId": "r1", "title": "rm", "kind": "delete"}, "options": permissionOptions()}}
		f.write(req)
		f.write(map[string]any{"id": "dup", "method": "session/request_permission", "params": req["params"]})
		f.write(map[string]any{"id": 999, "result": map[string]any{}})
		first := "" // the first answer carrying "dup": this agent's answer to it
		for r := range f.replies {
			if r["id"] == "dup" {
				first = outcomeOf(r)
				if _, isErr := r["error"]; isErr {
					first = answerText(r)
				}
				break
			}
		}
		f.update(sid, chunk("agent_message_chunk", first))
		f.result(id, map[string]any{"stopReason": "end_turn"})
		f.result(id, map[string]any{"stopReason": "end_turn"}) // again
		return
	case "garbage":
		f.line("this is not json")
		f.line("{broken")
		f.line("[1,2,3]")
		f.update(sid, chunk("agent_message_chunk", "after garbage"))
	case "unserved":
		got := []string{}
		for _, m := range []string{"fs/read_text_file", "terminal/create", "craft/drainMidTurnQueue", "fs/read_text_file"} {
			got = append(got, answerText(f.ask(m, map[string]any{"sessionId": sid, "path": "/etc/hostname", "command": "ls"})))
		}
		f.update(sid, chunk("agent_message_chunk", strings.Join(got, ";")))
	case "manynames": // n distinct unknown notifications, m distinct unserved methods (one of 100 KB), not awaited
		n, _ := strconv.Atoi(words[1])
		m, _ := strconv.Atoi(words[2])
		for i := range n {
			f.write(map[string]any{"method": fmt.Sprintf("vendor/n%d", i), "params": map[string]any{}})
		}
		for i := range m {
			name := fmt.Sprintf("vendor/m%d", i)
			if i == 0 {
				name += "\n" + strings.Repeat("L", 100<<10)
			}
			f.write(map[string]any{"id": fmt.Sprintf("q-%d", i), "method": name, "params": map[string]any{}})
		}
		f.update(sid, chunk("agent_message_chunk", "done"))
	case "longid": // a permission request and an fs request, each with a 4 KB id
		f.write(map[string]any{"id": "p-" + strings.Repeat("i", 4<<10), "method": "session/request_permission", "params": map[string]any{"sessionId": sid,
			"toolCall": map[string]any{"toolCallId": "l1", "title": "rm", "kind": "delete"}, "options": permissionOptions()}})
		f.write(map[string]any{"id": strings.Repeat("9", 4<<10), "method": "fs/read_text_file", "params": map[string]any{"sessionId": sid, "path": "/x"}})
		f.update(sid, chunk("agent_message_chunk", "done"))
	case "kinds":
		for range 2 {
			f.update(sid, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": "code"})
			f.update(sid, map[string]any{"sessionUpdate": "session_info_update", "title": "t"})
			f.update(sid, map[string]any{"sessionUpdate": "config_option_update", "configOptions": []any{}})
			f.update(sid, map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{}})
			f.update(sid, map[string]any{"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "started"})
			f.update(sid, map[string]any{"sessionUpdate": "brand_new_kind", "x": 1})
		}
		f.write(map[string]any{"method": "vendor/ping", "params": map[string]any{}})
		f.update(sid, chunk("agent_message_chunk", "done"))
	case "edit":
		f.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "e1", "title": "Edit a.txt", "kind": "edit", "status": "in_progress",
			"locations": []any{map[string]any{"path": "/w/a.txt"}}})
		f.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "completed",
			"content": []any{map[string]any{"type": "diff", "path": "/w/a.txt", "oldText": "a\n", "newText": "b\n"}}})
		f.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "s1", "title": "grep foo", "kind": "search", "status": "completed",
			"rawInput": map[string]any{"pattern": "foo"}})
	case "crash":
		f.update(sid, chunk("agent_message_chunk", "bye"))
		f.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "sleep", "kind": "execute", "status": "in_progress"})
		os.Exit(3)
	case "stop":
		stop = words[1]
	case "lateperm": // the prompt answered, then a permission request (not awaited)
		f.result(id, map[string]any{"stopReason": "end_turn"})
		f.write(map[string]any{"id": "late-1", "method": "session/request_permission", "params": map[string]any{"sessionId": sid,
			"toolCall": map[string]any{"toolCallId": "late-call", "title": "rm", "kind": "delete"}, "options": permissionOptions()}})
		return
	case "badutf8": // a tool call and a permission request with invalid UTF-8 in their JSON strings
		bad := strings.NewReplacer("<ff>", "\xff", "<fe>", "\xfe", "<c3>", "\xc3")
		f.line(bad.Replace(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"tool_call",` +
			`"toolCallId":"u1","title":"t<ff>","kind":"other","status":"in_progress","rawInput":{"k<ff>":"v<fe>"}}}}`))
		f.line(bad.Replace(`{"jsonrpc":"2.0","id":"bad-utf8","method":"session/request_permission","params":{"sessionId":"` + sid + `",` +
			`"toolCall":{"toolCallId":"u1","rawInput":{"x":"<c3>"}},"options":[{"optionId":"a<ff>","name":"A","kind":"allow_once"}]}}`))
		<-cancel
		stop = "cancelled"
	case "longstop": // a stopReason of n bytes
		stop = strings.Repeat("s", atoi(words[1]))
	case "longfail": // an error answer whose message is n bytes
		f.write(map[string]any{"id": id, "error": map[string]any{"code": -32603, "message": strings.Repeat("e", atoi(words[1]))}})
		return
	case "fail":
		f.update(sid, chunk("agent_message_chunk", "partial"))
		f.write(map[string]any{"id": id, "error": map[string]any{"code": -32603, "message": "model exploded"}})
		return
	}
	end["stopReason"] = stop
	f.result(id, end)
}
