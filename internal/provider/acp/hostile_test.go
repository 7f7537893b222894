package acp

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// Updates for a session the adapter does not have are dropped, logged.
func TestUnknownSessionUpdates(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	evs := g.turn(t, "t_1", "unknown-session")
	if got := answerOf(t, evs); got != "mine" {
		t.Fatalf("text %q", got)
	}
	if !strings.Contains(g.log(), "update_unknown_session") {
		t.Fatal("not logged")
	}
}

// Lines that are no JSON-RPC message (a banner, broken JSON, an array) are
// skipped and counted, logged once (later ones at debug); the turn goes on.
func TestGarbageLines(t *testing.T) {
	g := startAgent(t, "banner", nil)
	g.lax = true
	g.start(t)
	evs := g.turn(t, "t_1", "garbage")
	if got := answerOf(t, evs); got != "after garbage" {
		t.Fatalf("text %q", got)
	}
	if n := g.a.Garbage(); n != 4 {
		t.Fatalf("garbage = %d, want 4", n)
	}
	if l := g.log(); strings.Count(l, "level=WARN") != 1 || !strings.Contains(l, "garbage_line") {
		t.Fatalf("log:\n%s", l)
	}
}

// A flood of session/update: every delta arrives, in order, nothing else
// breaks, and the log holds no line per message.
func TestFlood(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	evs := g.turn(t, "t_1", "flood 20000")
	if got := answerOf(t, evs); len(got) != 20000 {
		t.Fatalf("got %d bytes of text", len(got))
	}
	if l := g.log(); strings.Count(l, "\n") > 20 {
		t.Fatalf("the flood was logged: %d lines", strings.Count(l, "\n"))
	}
}

// Client methods the daemon does not serve are answered -32601, logged
// and journaled once per method.
func TestUnservedMethods(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	evs := g.turn(t, "t_1", "unserved")
	if got := answerOf(t, evs); got != "-32601;-32601;-32601;-32601" {
		t.Fatalf("agent got %q", got)
	}
	if n := len(of(evs, event.ProviderNotice)); n != 3 {
		t.Fatalf("%d notices for 3 methods: %s", n, types(evs))
	}
	if l := g.log(); strings.Count(l, "level=WARN") != 3 {
		t.Fatalf("log:\n%s", l)
	}
}

// The ignore list journals nothing; every other kind (and an unknown
// notification) is one provider.notice per kind, however often it comes.
func TestUpdateKinds(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	g.lax = true // brand_new_kind is no kind of the schema
	evs := g.turn(t, "t_1", "kinds")
	var codes []string
	for _, d := range of(evs, event.ProviderNotice) {
		codes = append(codes, data[event.NoticeData](t, d).Code)
	}
	if strings.Join(codes, ",") != "acp_compaction_update,acp_brand_new_kind,unknown_notification" {
		t.Fatalf("notices %v; events %s", codes, types(evs))
	}
	if types(evs) != "provider.notice,provider.notice,provider.notice,message.delta,message.completed,turn.completed" {
		t.Fatalf("events %s", types(evs))
	}
}

// Items: reasoning, the plan, a command with its output streamed and its
// exit code, a file change with its diff, another tool as toolCall.
func TestItems(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "work"); err != nil {
		t.Fatal(err)
	}
	evs := g.until(t, event.ApprovalRequested)
	ap := data[event.ApprovalRequestedData](t, evs[len(evs)-1])
	if err := g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, g.until(t, event.TurnCompleted)...)
	st := of(evs, event.ItemStarted)
	if len(st) != 2 || data[event.ItemData](t, st[0]).Kind != event.KindReasoning || data[event.ItemData](t, st[1]).Kind != event.KindCommandExecution {
		t.Fatalf("items %s", types(evs))
	}
	if p := data[event.TurnPlanData](t, of(evs, event.TurnPlan)[0]); len(p.Steps) != 1 || p.Steps[0].Status != "inProgress" || p.Steps[0].Step != "run it" {
		t.Fatalf("plan %+v", p)
	}
	var out string
	for _, d := range of(evs, event.ItemDelta) {
		if dd := data[event.ItemDeltaData](t, d); dd.Stream == event.StreamOutput {
			out += dd.Text
		}
	}
	if out != "out1\nout2\n" {
		t.Fatalf("output deltas %q", out)
	}
	var cmd event.ItemData
	for _, d := range of(evs, event.ItemCompleted) {
		if c := data[event.ItemData](t, d); c.ItemID == "call-1" {
			cmd = c
		}
	}
	p, _ := cmd.Payload.(map[string]any)
	if p["command"] != "touch done" || p["cwd"] != "/tmp" || p["exitCode"] != float64(0) || p["output"] != "out1\nout2\n" || cmd.Status != "completed" {
		t.Fatalf("command item %+v", cmd)
	}

	evs = g.turn(t, "t_2", "edit")
	var fc, search event.ItemData
	for _, d := range of(evs, event.ItemCompleted) {
		switch c := data[event.ItemData](t, d); c.ItemID {
		case "e1":
			fc = c
		case "s1":
			search = c
		}
	}
	changes, _ := fc.Payload.(map[string]any)["changes"].([]any)
	if fc.Kind != event.KindFileChange || len(changes) != 1 {
		t.Fatalf("file change %+v", fc)
	}
	ch := changes[0].(map[string]any)
	if ch["path"] != "/w/a.txt" || ch["kind"] != "update" || !strings.Contains(ch["diff"].(string), "-a\n+b\n") {
		t.Fatalf("change %v", ch)
	}
	if sp := search.Payload.(map[string]any); search.Kind != event.KindToolCall || sp["name"] != "grep foo" || sp["input"] == nil {
		t.Fatalf("search %+v", search)
	}
}

// Cancel mid-stream: session/cancel, the agent answers cancelled: the
// turn ends interrupted (user_cancel) with the text so far completed.
func TestCancelMidStream(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "slow"); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.MessageDelta)
	if ok, err := g.a.Interrupt(t.Context()); !ok || err != nil {
		t.Fatalf("interrupt: %v %v", ok, err)
	}
	evs := g.until(t, event.TurnCompleted)
	if tc := data[event.TurnCompletedData](t, evs[len(evs)-1]); tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonUserCancel || tc.StopReason != "cancelled" {
		t.Fatalf("turn.completed = %+v", tc)
	}
	if len(of(evs, event.MessageCompleted)) != 1 {
		t.Fatalf("events %s", types(evs))
	}
	if ok, _ := g.a.Interrupt(t.Context()); ok {
		t.Fatal("interrupted a turn that ended")
	}
}

// An agent that ignores session/cancel: after InterruptTimeout the turn
// ends interrupted here and Stuck tells the host to stop it.
func TestStuckCancel(t *testing.T) {
	stuck := make(chan struct{})
	g := startAgent(t, "", func(o *provider.Options, _ *Profile) {
		o.InterruptTimeout = 100 * time.Millisecond
		o.Stuck = func() { close(stuck) }
	})
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "hang"); err != nil {
		t.Fatal(err)
	}
	if ok, err := g.a.Interrupt(t.Context()); !ok || err != nil {
		t.Fatalf("interrupt: %v %v", ok, err)
	}
	evs := g.until(t, event.TurnCompleted)
	<-stuck
	if tc := data[event.TurnCompletedData](t, evs[len(evs)-1]); tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonUserCancel {
		t.Fatalf("turn.completed = %+v", tc)
	}
}

// The agent exiting mid-turn: its open items complete interrupted and Done
// closes; the turn is the host's to end (provider_exited).
func TestAgentExitsMidTurn(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "crash"); err != nil {
		t.Fatal(err)
	}
	<-g.a.Done()
	var evs []event.Draft
	for len(g.evs) > 0 {
		evs = append(evs, <-g.evs)
	}
	if types(evs) != "message.delta,message.completed,item.started,item.completed" {
		t.Fatalf("events %s", types(evs))
	}
	if c := data[event.ItemData](t, evs[3]); c.Status != event.ItemInterruptedStatus {
		t.Fatalf("item %+v", c)
	}
	if !g.a.Busy() {
		t.Fatal("the open turn is the host's to end")
	}
}

// Stop reasons: max_tokens, refusal, max_turn_requests complete the turn
// (stopReason kept); an unknown one fails it naming it, and so does an
// error answer to the prompt.
func TestStopReasons(t *testing.T) {
	g := startAgent(t, "", nil)
	g.lax = true // "bogus"
	g.start(t)
	for i, c := range []struct{ stop, status string }{
		{"max_tokens", event.StatusCompleted}, {"refusal", event.StatusCompleted}, {"max_turn_requests", event.StatusCompleted},
		{"cancelled", event.StatusInterrupted}, {"bogus", event.StatusFailed},
	} {
		evs := g.turn(t, "t_"+string(rune('a'+i)), "stop "+c.stop)
		tc := data[event.TurnCompletedData](t, evs[len(evs)-1])
		if tc.Status != c.status || tc.StopReason != c.stop {
			t.Fatalf("%s: %+v", c.stop, tc)
		}
		if c.stop == "bogus" && !strings.Contains(tc.Error, "bogus") {
			t.Fatalf("%+v", tc)
		}
	}
	// An error answer fails the turn naming it, the text so far completed.
	evs := g.turn(t, "t_z", "fail")
	tc := data[event.TurnCompletedData](t, evs[len(evs)-1])
	if tc.Status != event.StatusFailed || tc.Reason != event.ReasonProviderError || !strings.Contains(tc.Error, "model exploded") ||
		len(of(evs, event.MessageCompleted)) != 1 {
		t.Fatalf("failed prompt: %+v; %s", tc, types(evs))
	}
}

// What the adapter keeps for an item is bounded in bytes: a message's
// completed text at 1 MiB (its deltas carry it all), a command's output
// (its content or its rawOutput) at 64 KiB with the rest counted;
// non-text content is one notice.
func TestBoundedItems(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	evs := g.turn(t, "t_1", "big")
	if got := answerOf(t, evs); len(got) != 2<<20 {
		t.Fatalf("deltas carry %d bytes", len(got))
	}
	if mc := of(evs, event.MessageCompleted); len(mc) != 1 || len(data[event.DeltaData](t, mc[0]).Text) != maxItemText {
		t.Fatalf("message.completed %d", len(mc))
	}
	for i, d := range of(evs, event.ItemCompleted) {
		c := data[event.ItemData](t, d)
		p := c.Payload.(map[string]any)
		if len(p["output"].(string)) != event.MaxOutputBytes || p["outputTruncated"] != float64(100<<10-event.MaxOutputBytes) {
			t.Fatalf("item %d: output %d bytes, truncated %v", i, len(p["output"].(string)), p["outputTruncated"])
		}
		if i == 1 && (p["exitCode"] != float64(3) || c.Status != event.ItemFailedStatus) {
			t.Fatalf("item %d: %+v", i, c)
		}
	}
	if n := of(evs, event.ProviderNotice); len(n) != 1 || data[event.NoticeData](t, n[0]).Code != "non_text_content" {
		t.Fatalf("notices %v", n)
	}
}

// Long toolCallIds are named by a digest (as long request ids are), and a
// completed call is dropped from the turn: what a turn holds is bounded by
// its open calls, whatever the agent's ids.
func TestLongToolCallIDs(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	ap := g.waitApproval(t, "bigids")
	g.a.mu.Lock()
	open, order := len(g.a.turn.tools), len(g.a.turn.toolOrder)
	g.a.mu.Unlock()
	if open != 1 || order != 1 {
		t.Fatalf("the turn holds %d tools, %d in order; want only the open one", open, order)
	}
	if err := g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "deny"}); err != nil {
		t.Fatal(err)
	}
	evs := g.until(t, event.TurnCompleted)
	started := map[string]bool{}
	for _, d := range append(of(evs, event.ItemStarted), of(evs, event.ItemCompleted)...) {
		id := data[event.ItemData](t, d).ItemID
		if len(id) > 129 {
			t.Fatalf("an itemId of %d bytes", len(id))
		}
		started[id] = true
	}
	if len(ap.ItemID) > 129 || !started[ap.ItemID] {
		t.Fatalf("approval itemId %q is not the open call's (%d items)", capText(ap.ItemID, 40), len(started))
	}
	if got := answerOf(t, evs); got != "outcome=no" {
		t.Fatalf("agent got %q", got)
	}
}

// An agent that floods requests and stops reading its stdin: our answers
// wait in a bounded queue (the reader goes on reading); the queue full,
// the agent is hung (Stuck). Interrupt cannot write session/cancel then,
// yet arms the stuck-turn timer: the turn ends interrupted.
func TestAgentStopsReading(t *testing.T) {
	stuck := make(chan struct{})
	var once sync.Once
	g := startAgent(t, "", func(o *provider.Options, _ *Profile) {
		o.InterruptTimeout = 50 * time.Millisecond
		o.Stuck = func() { once.Do(func() { close(stuck) }) }
	})
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "noread 8000"); err != nil {
		t.Fatal(err)
	}
	evs := g.until(t, event.MessageDelta)
	if d := data[event.DeltaData](t, evs[len(evs)-1]); d.Text != "flooded" {
		t.Fatalf("delta %+v", d)
	}
	select {
	case <-stuck:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent not reading its stdin was not reported stuck")
	}
	ok, err := g.a.Interrupt(t.Context())
	if !ok || err == nil {
		t.Fatalf("interrupt: %v %v", ok, err)
	}
	evs = g.until(t, event.TurnCompleted)
	if tc := data[event.TurnCompletedData](t, evs[len(evs)-1]); tc.Status != event.StatusInterrupted {
		t.Fatalf("turn.completed = %+v", tc)
	}
}

// An agent closing its stdout mid-turn while it runs on: the reader ends
// (Done, the turn's items completed interrupted) though the process lives;
// the host takes Done as the provider gone and stops it
// (host.TestStdoutClosedWhileRunningEvicts).
func TestAgentClosesStdout(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "closeout"); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.MessageDelta)
	select {
	case <-g.a.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the reader did not end on the agent's stdout EOF")
	}
	if err := g.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the agent is not running: %v", err)
	}
}

// The bytes a turn's open tool calls hold are bounded: past the budget a
// fresh call is dropped (logged), the turn goes on.
func TestOpenToolCallsBudget(t *testing.T) {
	old := maxTurnToolBytes
	maxTurnToolBytes = 1 << 20
	t.Cleanup(func() { maxTurnToolBytes = old })
	g := startAgent(t, "", nil)
	g.start(t)
	evs := g.turn(t, "t_1", "fattools")
	if n := len(of(evs, event.ItemStarted)); n == 0 || n >= 40 {
		t.Fatalf("%d calls opened of 40 (budget 1 MiB)", n)
	}
	if !strings.Contains(g.log(), "open_tool_calls_over_budget") {
		t.Fatal("not logged")
	}
	if got := answerOf(t, evs); got != "done" {
		t.Fatalf("text %q", got)
	}
}

// An agent making up names: 20,000 distinct unknown notifications and
// 1,000 distinct unserved methods (one with a 100 KB name and a newline)
// journal at most maxNoticeKeys notices plus one notices_capped, remember
// at most that many keys, log a bounded number of lines (rate-limited,
// with the count suppressed) and never show a name past maxNameBytes.
func TestDistinctNamesBounded(t *testing.T) {
	g := startAgent(t, "", nil)
	g.lax = true // vendor methods are no part of the schema
	g.start(t)
	evs := g.turn(t, "t_1", "manynames 20000 1000")
	if got := answerOf(t, evs); got != "done" {
		t.Fatalf("text %q", got)
	}
	ns := of(evs, event.ProviderNotice)
	capped := 0
	for _, d := range ns {
		n := data[event.NoticeData](t, d)
		if n.Code == "notices_capped" {
			capped++
		}
		if len(n.Message) > 2*maxNameBytes+200 || strings.Contains(n.Message, "\n") {
			t.Fatalf("a notice of %d bytes: %.200q", len(n.Message), n.Message)
		}
	}
	if len(ns) != maxNoticeKeys+1 || capped != 1 {
		t.Fatalf("%d notices (%d notices_capped) for 21,000 names; want %d + 1", len(ns), capped, maxNoticeKeys)
	}
	g.a.mu.Lock()
	warned, logs, over := len(g.a.warned), len(g.a.logs), g.a.noticesOver
	g.a.mu.Unlock()
	if warned > maxNoticeKeys || logs > maxLogKinds+1 || over != 21000-maxNoticeKeys {
		t.Fatalf("remembered %d notice keys, %d log kinds; %d over the cap", warned, logs, over)
	}
	l := g.log()
	lines := strings.Split(l, "\n")
	if len(lines) > maxLogKinds+200 {
		t.Fatalf("%d log lines for 21,000 names", len(lines))
	}
	for _, line := range lines {
		if len(line) > 4096 {
			t.Fatalf("a log line of %d bytes: %.200s", len(line), line)
		}
	}
	if !strings.Contains(l, "suppressed=") || !strings.Contains(l, "kind="+overflowKind) {
		t.Fatalf("no rate-limited line with its suppressed count, or no overflow kind:\n%.3000s", l)
	}
}

// The answers waiting for an agent that stopped reading are bounded in
// bytes too: 1,500 requests with ids of 1,000 bytes (fewer than
// maxQueuedAnswers, more than maxQueuedAnswerBytes) make the agent hung.
func TestAgentStopsReadingBytes(t *testing.T) {
	stuck := make(chan struct{})
	var once sync.Once
	g := startAgent(t, "", func(o *provider.Options, _ *Profile) {
		o.Stuck = func() { once.Do(func() { close(stuck) }) }
	})
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "noread 1500 1000"); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.MessageDelta)
	select {
	case <-stuck:
	case <-time.After(20 * time.Second):
		t.Fatalf("1500 answers of about 1 KB queued (%d bytes) and the agent is not reported stuck", g.a.queuedBytes.Load())
	}
	if n := g.a.queuedBytes.Load(); n > maxQueuedAnswerBytes {
		t.Fatalf("%d bytes queued, over %d", n, maxQueuedAnswerBytes)
	}
	if l := g.log(); !strings.Contains(l, "max_bytes=1048576") {
		t.Fatalf("log:\n%.2000s", l)
	}
}

// A request id over maxAgentIDBytes is refused (invalid request naming the
// size and the limit), journaled once; no approval is opened and nothing
// of it is kept.
func TestLongRequestIDs(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	evs := g.turn(t, "t_1", "longid")
	if got := answerOf(t, evs); got != "done" {
		t.Fatalf("text %q", got)
	}
	if n := len(of(evs, event.ApprovalRequested)); n != 0 {
		t.Fatalf("%d approvals for ids over the limit", n)
	}
	if err := g.a.flushAnswers(t.Context()); err != nil {
		t.Fatal(err)
	}
	refused := 0
	g.mu.Lock()
	for _, l := range g.sent {
		if bytes.Contains(l, []byte(`"code":-32600`)) && bytes.Contains(l, []byte("is over 1024 bytes")) && len(l) > 4<<10 {
			refused++ // the id echoed: the agent can match it
		}
	}
	g.mu.Unlock()
	if refused != 2 {
		t.Fatalf("%d refusals of long ids", refused)
	}
	if ns := of(evs, event.ProviderNotice); len(ns) != 1 || data[event.NoticeData](t, ns[0]).Code != "request_id_too_long" {
		t.Fatalf("notices %s", types(evs))
	}
	if g.a.Busy() {
		t.Fatal("an approval is open")
	}
	if n := g.a.queuedBytes.Load(); n != 0 {
		t.Fatalf("every answer written, yet %d bytes counted queued", n)
	}
}

// The turn's tool call budget holds for updates too: 40 small open calls
// each updated with 64 KB of output stay within 1 MiB (an update past it
// is dropped, logged), what is counted is what is held, and a call
// completed past the budget still completes.
func TestToolUpdatesBudget(t *testing.T) {
	old := maxTurnToolBytes
	maxTurnToolBytes = 1 << 20
	t.Cleanup(func() { maxTurnToolBytes = old })
	g := startAgent(t, "", nil)
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "fatupdates"); err != nil {
		t.Fatal(err)
	}
	evs := g.until(t, event.MessageDelta)
	if n := len(of(evs, event.ItemStarted)); n != 40 {
		t.Fatalf("%d calls opened of 40", n)
	}
	if c := of(evs, event.ItemCompleted); len(c) != 1 || data[event.ItemData](t, c[0]).ItemID != "u39" {
		t.Fatalf("completed: %s", types(evs))
	}
	g.a.mu.Lock()
	counted, held := g.a.turn.toolBytes, 0
	for _, tl := range g.a.turn.tools {
		held += tl.size()
	}
	g.a.mu.Unlock()
	if counted != held || held > maxTurnToolBytes {
		t.Fatalf("the open calls hold %d bytes, counted %d (budget %d)", held, counted, maxTurnToolBytes)
	}
	if !strings.Contains(g.log(), "open_tool_calls_over_budget") {
		t.Fatal("not logged")
	}
	if _, err := g.a.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.TurnCompleted)
}

// Oversized lists in one update are cut where they are read: a plan keeps
// maxPlanSteps steps of at most maxStepBytes each; a file change keeps
// maxFileChanges changes, from its diffs or its locations (paths capped).
func TestOversizedLists(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	evs := g.turn(t, "t_1", "manysteps")
	pl := data[event.TurnPlanData](t, of(evs, event.TurnPlan)[0])
	if len(pl.Steps) != maxPlanSteps {
		t.Fatalf("a plan of %d steps", len(pl.Steps))
	}
	for _, st := range pl.Steps {
		if len(st.Step) > maxStepBytes {
			t.Fatalf("a step of %d bytes", len(st.Step))
		}
	}
	cs := of(evs, event.ItemCompleted)
	if len(cs) != 2 {
		t.Fatalf("events %s", types(evs))
	}
	for _, d := range cs {
		c := data[event.ItemData](t, d)
		changes, _ := c.Payload.(map[string]any)["changes"].([]any)
		if len(changes) != maxFileChanges {
			t.Fatalf("%s: %d changes", c.ItemID, len(changes))
		}
		for _, ch := range changes {
			if p := ch.(map[string]any)["path"].(string); len(p) > 4096 {
				t.Fatalf("%s: a path of %d bytes", c.ItemID, len(p))
			}
		}
	}
	if !strings.Contains(g.log(), "plan_too_long") {
		t.Fatal("not logged")
	}
}

// A kind still occurring is logged at least once per logEvery, with what
// was suppressed since its last line (the clock is the adapter's).
func TestAnomalyLogEvery(t *testing.T) {
	g := startAgent(t, "", nil)
	g.lax = true // vendor methods are no part of the schema
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g.a.mu.Lock()
	g.a.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	g.a.mu.Unlock()
	g.start(t)
	g.turn(t, "t_1", "manynames 5 0") // occurrences 1, 2, 4 logged; 3 and 5 suppressed
	if l := g.log(); strings.Count(l, "kind=unknown_notification") != 3 {
		t.Fatalf("log:\n%s", l)
	}
	g.turn(t, "t_2", "manynames 1 0") // the 6th, within logEvery: suppressed
	mu.Lock()
	now = now.Add(logEvery)
	mu.Unlock()
	g.turn(t, "t_3", "manynames 1 0") // the 7th, logEvery later: logged
	l := g.log()
	if strings.Count(l, "kind=unknown_notification") != 4 || !strings.Contains(l, "count=7 suppressed=2") {
		t.Fatalf("log:\n%s", l)
	}
}

// An agent that stops reading its stdin with fewer answers waiting than
// fill the queue: the first answer not read within the request timeout
// makes it hung (Stuck), and the rest are not written (each would hold
// the stdin, and a session/cancel behind it, for the timeout).
func TestAgentStopsReadingAnswers(t *testing.T) {
	stuck := make(chan struct{})
	var once sync.Once
	g := startAgent(t, "", func(o *provider.Options, _ *Profile) {
		o.RequestTimeout = 500 * time.Millisecond
		o.Stuck = func() { once.Do(func() { close(stuck) }) }
	})
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "noread 400 1000"); err != nil { // 400 KB: past the pipe, within the queue
		t.Fatal(err)
	}
	g.until(t, event.MessageDelta)
	select {
	case <-stuck:
	case <-time.After(20 * time.Second):
		t.Fatalf("answers not read (%d bytes queued) and the agent is not reported stuck\nlog:\n%.3000s", g.a.queuedBytes.Load(), g.log())
	}
	if l := g.log(); !strings.Contains(l, "cause=answer_not_read") {
		t.Fatalf("log:\n%.2000s", l)
	}
	ok, err := g.a.Interrupt(t.Context())
	if !ok || err == nil {
		t.Fatalf("interrupt: %v %v", ok, err)
	}
}

// A cancel while an answer the agent does not read holds its stdin (the
// request timeout far off): Interrupt does not wait for the stdin; it
// returns within InterruptTimeout naming why, and the stuck-turn timer
// ends the turn interrupted.
func TestCancelBehindUnreadAnswer(t *testing.T) {
	g := startAgent(t, "", func(o *provider.Options, _ *Profile) {
		o.RequestTimeout = time.Hour
		o.InterruptTimeout = 50 * time.Millisecond
	})
	g.start(t)
	// Two requests whose 500 KB ids are refused: the agent reads the first
	// answer (its last line read); the second, echoing its id, is far more
	// than the pipe holds.
	if err := g.a.StartTurn(t.Context(), "t_1", "noread 2 500000"); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.MessageDelta)
	for writing := false; !writing; { // recorded as its write starts, which cannot end
		for _, m := range g.sentLines() {
			if id, _ := m["id"].(string); strings.HasPrefix(id, "r-1-") {
				writing = true
			}
		}
		if !writing {
			select {
			case <-g.wrote:
			case <-time.After(20 * time.Second):
				t.Fatal("the answer is not being written")
			}
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := g.a.Interrupt(t.Context())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "does not read its stdin") {
			t.Fatalf("interrupt: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Interrupt waits for the stdin an unread answer holds")
	}
	evs := g.until(t, event.TurnCompleted)
	if tc := data[event.TurnCompletedData](t, evs[len(evs)-1]); tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonUserCancel {
		t.Fatalf("turn.completed = %+v", tc)
	}
}

// Invalid UTF-8 in the agent's JSON strings: what the adapter keeps of it
// as raw JSON (an item's raw and input, an approval's detail) is valid
// UTF-8 (U+FFFD for each bad run) and valid JSON, so every client can
// decode the events.
func TestInvalidUTF8(t *testing.T) {
	g := startAgent(t, "", nil)
	g.lax = true // the agent's lines are not UTF-8
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "badutf8"); err != nil {
		t.Fatal(err)
	}
	evs := g.until(t, event.ApprovalRequested)
	for _, d := range evs {
		if !utf8.Valid(d.Data) || !json.Valid(d.Data) {
			t.Fatalf("%s is not valid UTF-8 JSON: %q", d.Type, d.Data)
		}
	}
	if len(of(evs, event.ItemStarted)) != 1 {
		t.Fatalf("events %s", types(evs))
	}
	if _, err := g.a.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.TurnCompleted)
}
