package echo

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/budget"
)

// directives are the test switches found in a message's text.
type directives struct {
	sleep      time.Duration
	crash      bool
	closeOut   bool // after the first delta, close stdout and go on running
	approve    bool
	orphan     bool
	forget     bool
	work       bool
	workN      int // output deltas of /work's command
	workThink  int // reasoning text deltas of /work
	ask        bool
	floodN     int
	floodBytes int
	escape     bool
	cgmove     string // /cgmove MODE: an /escape descendant moved to another cgroup
	forkbomb   int    // processes /forkbomb starts
	hogMiB     int    // memory /hog holds
	numbered   bool   // flood deltas carry their number (zero-padded to floodBytes)
	splitAt    string // a FIFO: the flood's middle delta line is cut in two around reading it
	rateLimit  bool   // /ratelimit: the turn ends failed, usage limit reached (ratelimit.go)
	history    bool   // /history: the answer ends with " history=N", the thread's earlier turns
}

func parseDirectives(text string) directives {
	var d directives
	f := strings.Fields(text)
	num := func(i int) (int, bool) {
		if i >= len(f) {
			return 0, false
		}
		n, err := strconv.Atoi(f[i])
		return n, err == nil && n >= 0
	}
	for i := 0; i < len(f); i++ {
		switch f[i] {
		case "/sleep":
			if n, ok := num(i + 1); ok {
				d.sleep = budget.Mul(int64(n), time.Millisecond) // a huge N sleeps ~292 years, not a negative time
				i++
			}
		case "/crash":
			d.crash = true
		case "/closeout":
			d.closeOut = true
		case "/approve":
			d.approve = true
		case "/orphan":
			d.orphan = true
		case "/forget":
			d.forget = true
		case "/work":
			d.work, d.workN, d.workThink = true, 2, 1
			if n, ok := num(i + 1); ok && n > 0 {
				d.workN = n
				i++
				if m, ok := num(i + 1); ok && m > 0 {
					d.workThink = m
					i++
				}
			}
		case "/ask":
			d.ask = true
		case "/escape":
			d.escape = true
		case "/cgmove":
			if i+1 < len(f) && cgmoveModes[f[i+1]] {
				d.cgmove = f[i+1]
				i++
			}
		case "/hog":
			if n, ok := num(i + 1); ok && n > 0 {
				d.hogMiB = min(n, maxHogMiB)
				i++
			}
		case "/forkbomb":
			if n, ok := num(i + 1); ok && n > 0 {
				d.forkbomb = min(n, maxForkbomb)
				i++
			}
		case "/numbered":
			d.numbered = true
		case "/ratelimit":
			d.rateLimit = true
		case "/history":
			d.history = true
		case "/split":
			if i+1 < len(f) {
				d.splitAt = f[i+1]
				i++
			}
		case "/flood":
			if n, ok := num(i + 1); ok {
				d.floodN, d.floodBytes = n, 8
				i++
				if b, ok := num(i + 1); ok && b > 0 {
					d.floodBytes = b
					i++
				}
			}
		}
	}
	return d
}

// splitAnswer cuts an answer into a few deltas (3 when long enough).
func splitAnswer(a string) []string {
	const parts = 3
	if len(a) < parts {
		return []string{a}
	}
	var out []string
	step := (len(a) + parts - 1) / parts
	for len(a) > 0 {
		n := min(step, len(a))
		out = append(out, a[:n])
		a = a[n:]
	}
	return out
}

// runTurn plays one turn: turn/started, item/started, deltas,
// item/completed, turn/completed; interrupts end it "interrupted".
func (s *server) runTurn(th *thread, tu *activeTurn, text string) {
	d := parseDirectives(text)
	itemID := tu.id + "_msg"
	with := func(kv ...any) map[string]any {
		m := map[string]any{"threadId": th.id, "turnId": tu.id}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	s.w.notify("turn/started", map[string]any{"threadId": th.id, "turn": map[string]any{"id": tu.id, "status": "inProgress", "items": []any{}}})
	if s.rateLimited(th, tu, text, d, with) {
		return
	}
	s.w.notify("item/started", with("item", map[string]any{"type": "agentMessage", "id": itemID, "text": ""}, "startedAtMs", time.Now().UnixMilli()))
	if d.orphan {
		s.spawnOrphan()
	}
	answer := "echo: " + text
	if d.history {
		_, past, _ := s.store.load(th.id)
		answer += fmt.Sprintf(" history=%d", len(past))
	}
	if d.escape {
		answer += fmt.Sprintf(" escaped=%d", s.spawnEscape(""))
	}
	if d.cgmove != "" {
		answer += fmt.Sprintf(" escaped=%d", s.spawnEscape(d.cgmove))
	}
	if d.hogMiB > 0 {
		answer += fmt.Sprintf(" hog=%d", s.spawnHog(d.hogMiB))
	}
	if d.forkbomb > 0 {
		answer += fmt.Sprintf(" forkbomb=%d", s.spawnForkbomb(d.forkbomb))
	}
	if d.approve {
		ch := s.request("item/commandExecution/requestApproval", with("itemId", tu.id+"_cmd", "command", "echo approve",
			"cwd", th.cwd, "reason", "the echo provider asks (/approve)", "startedAtMs", time.Now().UnixMilli()))
		select {
		case res := <-ch:
			if dec := decisionOf(res); dec != "accept" && dec != "acceptForSession" {
				answer = "declined"
			}
		case <-tu.cancel:
			s.dropApproval(ch)
			s.finishTurn(th, tu, text, "", "interrupted", false)
			return
		case <-s.eof:
			return
		}
	}
	if d.work {
		suffix, ok := s.playWork(th, tu, text, d.workN, d.workThink, with)
		if !ok {
			return
		}
		answer += suffix
	}
	if d.ask {
		suffix, ok := s.playAsk(th, tu, text, with)
		if !ok {
			return
		}
		answer += suffix
	}
	if d.sleep > 0 {
		t := time.NewTimer(d.sleep)
		select {
		case <-t.C:
		case <-tu.cancel:
			t.Stop()
			s.finishTurn(th, tu, text, "", "interrupted", false)
			return
		case <-s.eof:
			t.Stop()
			return
		}
	}
	deltas := splitAnswer(answer)
	if d.floodN > 0 && answer != "declined" {
		chunk := strings.Repeat("x", d.floodBytes)
		deltas = make([]string, d.floodN)
		for i := range deltas {
			deltas[i] = chunk
			if d.numbered {
				deltas[i] = fmt.Sprintf("%0*d", d.floodBytes, i)
			}
		}
		answer = strings.Join(deltas, "")
	}
	for i, delta := range deltas {
		msg := map[string]any{"method": "item/agentMessage/delta", "params": with("itemId", itemID, "delta", delta)}
		if d.splitAt != "" && i == len(deltas)/2 {
			s.w.sendSplit(msg, d.splitAt, s.log)
			continue
		}
		s.w.send(msg, d.floodN == 0)
		if d.closeOut && i == 0 {
			s.log.Warn("closing stdout mid-turn (/closeout)", "turn_id", tu.id)
			s.w.closeOut()
			return
		}
		if d.crash && i == 0 {
			s.w.flush()
			s.log.Warn("crashing mid-turn (/crash)", "turn_id", tu.id)
			s.exit <- exitCrashed
			return
		}
	}
	s.w.notify("item/completed", with("item", map[string]any{"type": "agentMessage", "id": itemID, "text": answer}, "completedAtMs", time.Now().UnixMilli()))
	s.finishTurn(th, tu, text, answer, "completed", d.forget)
}

// finishTurn records the turn in the thread's history (or, with forget,
// deletes the thread), marks the thread idle and sends turn/completed
// (which also flushes any flood). The file is settled before turn/completed
// goes out: a client that stops us right after it sees the final state.
func (s *server) finishTurn(th *thread, tu *activeTurn, text, answer, status string, forget bool) {
	if forget {
		if err := s.store.remove(th.id); err != nil {
			s.log.Warn("forget thread", "thread_id", th.id, "err", err)
		}
	} else if err := s.store.appendTurn(th.id, turnRecord{TurnID: tu.id, Input: text, Answer: answer, Status: status}); err != nil {
		s.log.Warn("append turn", "thread_id", th.id, "err", err)
	}
	s.mu.Lock()
	if th.active == tu {
		th.active = nil
	}
	s.mu.Unlock()
	s.w.notify("turn/completed", map[string]any{
		"threadId": th.id,
		"turn":     map[string]any{"id": tu.id, "status": status, "items": []any{}, "error": nil},
	})
}

// spawnOrphan starts a descendant that outlives us: a new session, stdio on
// /dev/null, SIGTERM ignored, sleeping forever. It re-executes our own
// binary with our arguments plus the hidden --orphan-child flag.
func (s *server) spawnOrphan() {
	cmd := exec.Command("/proc/self/exe", append(append([]string{}, os.Args[1:]...), orphanFlag)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		s.log.Warn("spawn orphan", "err", err)
		return
	}
	s.log.Info("spawned orphan (/orphan)", "orphan_pid", cmd.Process.Pid)
	_ = cmd.Process.Release()
}
