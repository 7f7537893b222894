package acpagent

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/event"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestHoldHasTTL: every hold the bridge takes carries a ttl it renews well
// before it runs out, so a SIGKILLed bridge's holds end by themselves.
func TestHoldHasTTL(t *testing.T) {
	b := newBridge(flags{}, io.Discard, io.Discard)
	p := b.holdParams("s_x")
	if p.TTLMs == nil || *p.TTLMs <= 0 {
		t.Fatalf("hold without a ttl: %+v", p)
	}
	if holdRenew*2 > holdTTL {
		t.Fatalf("renewed every %s, ttl %s: one late renewal drops the hold", holdRenew, holdTTL)
	}
	if !strings.HasPrefix(p.HolderID, "acp:") || p.SessionID != "s_x" {
		t.Fatalf("holder %+v", p)
	}
}

func ev(seq uint64, typ string, data any) event.Event {
	b, _ := json.Marshal(data)
	return event.Event{Seq: seq, Type: typ, Data: b}
}

// TestReplayOpenApprovals: answered approvals are not asked again on load.
func TestReplayOpenApprovals(t *testing.T) {
	open := map[string]event.Event{}
	trackApproval(open, ev(1, event.ApprovalRequested, event.ApprovalRequestedData{RequestID: "a"}))
	trackApproval(open, ev(2, event.ApprovalResolved, event.ApprovalResolvedData{RequestID: "a", Decision: "approve"}))
	trackApproval(open, ev(3, event.ApprovalRequested, event.ApprovalRequestedData{RequestID: "b"}))
	if len(open) != 1 || open["b"].Seq != 3 {
		t.Fatalf("open %v", open)
	}
}

// TestFeedBound: live events past the queue's bound (in events or bytes)
// are not held: the queue is dropped and the feed marked to catch up
// from the journal, and nothing queues until it has.
func TestFeedBound(t *testing.T) {
	for name, size := range map[string]int{"events": 8, "bytes": 64 << 10} {
		s := &session{wake: make(chan struct{}, 1)}
		data := strings.Repeat("x", size)
		var seq uint64
		for s.resync == "" {
			seq++
			s.push(ev(seq, event.MessageDelta, event.DeltaData{Text: data}))
			if len(s.queue) > maxQueueEvents || s.queueBytes > maxQueueBytes {
				t.Fatalf("%s: %d events, %d bytes queued", name, len(s.queue), s.queueBytes)
			}
		}
		s.push(ev(seq+1, event.MessageDelta, event.DeltaData{Text: data}))
		if len(s.queue) != 0 || s.queueBytes != 0 {
			t.Fatalf("%s: %d events queued after the bound", name, len(s.queue))
		}
	}
}

func TestStopReason(t *testing.T) {
	for _, c := range []struct {
		d    event.TurnCompletedData
		stop string
	}{
		{event.TurnCompletedData{Status: "completed"}, "end_turn"},
		{event.TurnCompletedData{Status: "completed", StopReason: "max_tokens"}, "max_tokens"},
		{event.TurnCompletedData{Status: "interrupted", Reason: "user_cancel"}, "cancelled"},
		{event.TurnCompletedData{Status: "interrupted", Reason: "approval_denied"}, "end_turn"},
	} {
		if got := stopReason(c.d); got.stop != c.stop || got.err != nil {
			t.Errorf("%+v: %+v, want %s", c.d, got, c.stop)
		}
	}
	if got := stopReason(event.TurnCompletedData{Status: "failed", Reason: "provider_exited"}); got.err == nil {
		t.Errorf("a failed turn answers %+v, not an error", got)
	}
}

// TestReadLineBound: a line past maxLine is drained and reported; the
// next line reads whole.
func TestReadLineBound(t *testing.T) {
	in := strings.Repeat("x", maxLine+10) + "\n{\"a\":1}\n"
	r := bufio.NewReaderSize(strings.NewReader(in), 64<<10)
	if _, err := readLine(r); !errors.Is(err, errLineTooLong) {
		t.Fatalf("long line: %v", err)
	}
	line, err := readLine(r)
	if err != nil || string(line) != "{\"a\":1}\n" {
		t.Fatalf("next line %q %v", line, err)
	}
}

// TestOptions: approval decisions map onto ACP permission option kinds.
func TestOptions(t *testing.T) {
	for dec, kind := range map[string]string{"approve": "allow_once", "approveForSession": "allow_always", "deny": "reject_once"} {
		o, ok := permissionOption(dec)
		if !ok || o["kind"] != kind || o["optionId"] != dec {
			t.Errorf("%s: %v", dec, o)
		}
	}
	if _, ok := permissionOption("cancel"); ok {
		t.Error("cancel is an option")
	}
}
