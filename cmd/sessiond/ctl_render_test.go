package main

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

func ev(typ, turn string, data any) event.Event {
	d := event.New(typ, turn, data)
	return event.Event{Type: d.Type, TurnID: d.TurnID, Data: d.Data}
}

// TestRendererWholeReply: a reply that came only as message.completed (no
// deltas, as codex sends when the model streamed none) is printed whole;
// a streamed one is not printed twice; control characters are escaped.
func TestRendererWholeReply(t *testing.T) {
	var b bytes.Buffer
	r := newRenderer(&b, "s_1", true)
	for _, e := range []event.Event{
		ev(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "hi\x1b[31m"}),
		ev(event.MessageCompleted, "t1", event.DeltaData{Text: "whole reply", ItemID: "m1"}),
		ev(event.TurnCompleted, "t1", event.TurnCompletedData{Status: "completed"}),
		ev(event.MessageDelta, "t2", event.DeltaData{Text: "stre", ItemID: "m2"}),
		ev(event.MessageDelta, "t2", event.DeltaData{Text: "amed", ItemID: "m2"}),
		ev(event.MessageCompleted, "t2", event.DeltaData{Text: "streamed", ItemID: "m2"}),
		ev(event.TurnCompleted, "t2", event.TurnCompletedData{Status: "interrupted", Reason: "user_cancel"}),
	} {
		r.event(e)
	}
	got := b.String()
	want := "> hi\\x1b[31m\nwhole reply\nstreamed\nturn interrupted user_cancel\n"
	if got != want {
		t.Fatalf("rendered\n%q\nwant\n%q", got, want)
	}
	if strings.Count(got, "streamed") != 1 {
		t.Fatal("a streamed reply printed twice")
	}
}

// TestProcTree: without a cgroup, a session's tree is its provider, the
// provider's descendants and the processes tagged with the session (a
// double-forked child is no descendant), each once.
func TestProcTree(t *testing.T) {
	ps := procSnapshot{
		kids:   map[int][]int{1: {10, 99}, 10: {11, 12}, 12: {13}, 99: {100}, 50: {51}},
		tagged: map[string][]int{"s1": {99, 11}, "s2": {50}},
	}
	pids, src := ps.tree(api.SessionInfo{SessionID: "s1", PID: 10})
	sort.Ints(pids)
	if src != "proc" || fmt.Sprint(pids) != "[10 11 12 13 99 100]" {
		t.Fatalf("tree = %v from %s, want [10 11 12 13 99 100] from proc", pids, src)
	}
	if pids, _ := ps.tree(api.SessionInfo{SessionID: "s3", PID: 13}); fmt.Sprint(pids) != "[13]" {
		t.Fatalf("a leaf's tree = %v", pids)
	}
}

// TestCPUGrowth: a frame's CPU is each member's growth plus all of a new
// member; one that left adds nothing, a counter never goes back.
func TestCPUGrowth(t *testing.T) {
	prev := map[int]float64{1: 1.0, 2: 5.0, 3: 2.0}
	cur := map[int]float64{1: 1.5, 2: 5.0, 4: 0.25} // 3 exited, 4 is new
	if got := cpuGrowth(prev, cur); got != 0.75 {
		t.Fatalf("cpuGrowth = %v, want 0.75", got)
	}
	if got := cpuGrowth(map[int]float64{1: 2}, map[int]float64{1: 1}); got != 0 {
		t.Fatalf("cpuGrowth of a pid reused by a younger process = %v, want 0", got)
	}
}
