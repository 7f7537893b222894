package rpc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/testkit/frametest"
)

const allCaps = `["agent-session.attach.v1","agent-session.structured.hold.v1","agent-session.turns.v1","agent-session.close.v1","daemon.admin.v1"]`

func (r *raw) initializeAll() {
	r.t.Helper()
	r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"capabilities":` + allCaps + `}}`)
	if m := r.recv(); m["result"] == nil {
		r.t.Fatalf("initialize: %v", m)
	}
}

// frame frames msgs in r's framing, to be written at once (pipelined).
func (r *raw) frame(msgs ...string) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(frametest.Frame(m, r.f == FramingHeader))
	}
	return b.String()
}

func req(id int, method, params string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
}

// TestPipelinedHoldReleaseNotReordered: a hold and a release of one session
// written together, without waiting for either answer, run in that order
// even when the hold is slow (still starting its child when the release is
// read), and the connection keeps reading meanwhile.
func TestPipelinedHoldReleaseNotReordered(t *testing.T) {
	fake := newFake()
	ts := startServer(t, fake, nil)
	for _, f := range framings {
		t.Run(f.String(), func(t *testing.T) {
			unblock := make(chan struct{})
			var once sync.Once
			fake.mu.Lock()
			fake.holdHook = func(ctx context.Context) error {
				once.Do(func() {
					select {
					case <-unblock:
					case <-ctx.Done():
					}
				})
				return nil
			}
			fake.mu.Unlock()
			var closeOnce sync.Once
			release := func() { closeOnce.Do(func() { close(unblock) }) }
			t.Cleanup(release)
			r := ts.raw(t, f)
			r.initializeAll()
			sp := `{"sessionId":"s_aaaaaaaa","holderId":"h-` + f.String() + `"}`
			r.write(r.frame(req(1, "agentSession.hold", sp), req(2, "agentSession.release", sp), req(3, "daemon.status", `{}`)))
			if m := r.recv(); m["id"] != 3.0 || m["result"] == nil {
				t.Fatalf("first answer %v, want daemon.status's while the hold waits", m)
			}
			release()
			got := map[float64]map[string]any{}
			for range 2 {
				m := r.recv()
				got[m["id"].(float64)] = m
			}
			if got[1]["result"] == nil {
				t.Fatalf("hold: %v", got[1])
			}
			res, _ := got[2]["result"].(map[string]any)
			if res == nil || res["released"] != true {
				t.Fatalf("release answered %v, want released:true (it ran before the hold)", got[2])
			}
			if left := fake.heldBy(); len(left) != 0 {
				t.Fatalf("holds left: %v", left)
			}
		})
	}
}

// TestWaitingCallsDoNotStopReading: cancel and respond queued behind a send
// that waits under the session lock do not stop the connection reading:
// daemon.status answers meanwhile; then send, cancel and respond answer in
// the order sent.
func TestWaitingCallsDoNotStopReading(t *testing.T) {
	fake := newFake()
	fake.sessLocks = map[string]*sync.Mutex{}
	unblock := make(chan struct{})
	entered := make(chan struct{})
	fake.sendHook = func(ctx context.Context) error {
		close(entered)
		select {
		case <-unblock:
		case <-ctx.Done():
		}
		return nil
	}
	var closeOnce sync.Once
	release := func() { closeOnce.Do(func() { close(unblock) }) }
	t.Cleanup(release)
	ts := startServer(t, fake, nil)
	r := ts.raw(t, FramingLines)
	r.initializeAll()
	sid := `{"sessionId":"s_aaaaaaaa"}`
	r.write(r.frame(req(1, "agentSession.send", `{"sessionId":"s_aaaaaaaa","text":"hi"}`)))
	wait(t, entered)
	r.write(r.frame(
		req(2, "agentSession.cancel", sid),
		req(3, "agentSession.respond", `{"sessionId":"s_aaaaaaaa","requestId":"r1","decision":"approve"}`),
		req(4, "daemon.status", `{}`)))
	if m := r.recv(); m["id"] != 4.0 || m["result"] == nil {
		t.Fatalf("first answer %v, want daemon.status's while the send waits", m)
	}
	release()
	for want := 1.0; want <= 3; want++ {
		if m := r.recv(); m["id"] != want || m["result"] == nil {
			t.Fatalf("got %v, want the answer to %v", m, want)
		}
	}
}

// TestPipelinedBurstKeepsOrder: 1,000 hold/release pairs on 50 sessions,
// all written before any answer is read, end with every hold released and
// each session's calls run in the order sent. A session's first hold
// starts a (simulated) child, so calls queue behind it.
func TestPipelinedBurstKeepsOrder(t *testing.T) {
	fake := newFake()
	fake.startCost = func() { time.Sleep(2 * time.Millisecond) } // a child start; not synchronisation
	// The default max_message_bytes, so the queue bounds (4096 calls, 4 MiB
	// of params) are the daemon's, not the 4 KiB test setting's.
	ts := startServer(t, fake, func(o *ServerOptions) { o.MaxMessageBytes = 1 << 20 })
	r := ts.raw(t, FramingLines)
	r.initializeAll()
	const pairs, sessions = 1000, 50
	var msgs []string
	want := map[string][]string{}
	for i := range pairs {
		sid := fmt.Sprintf("s_burst%03d", i%sessions)
		holder := fmt.Sprintf("h%d", i)
		p := fmt.Sprintf(`{"sessionId":%q,"holderId":%q}`, sid, holder)
		msgs = append(msgs, req(2*i+1, "agentSession.hold", p), req(2*i+2, "agentSession.release", p))
		want[sid] = append(want[sid], "hold "+holder, "release "+holder)
	}
	werr := make(chan error, 1)
	go func() { // write while answers are read, as a pipelining client does
		_, err := r.nc.Write([]byte(r.frame(msgs...)))
		werr <- err
	}()
	for range 2 * pairs {
		m := r.recv()
		id := int(m["id"].(float64))
		res, _ := m["result"].(map[string]any)
		if res == nil {
			t.Fatalf("call %d: %v", id, m)
		}
		if id%2 == 0 && res["released"] != true {
			t.Fatalf("release %d answered %v, want released:true", id, m)
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if left := fake.heldBy(); len(left) != 0 {
		t.Fatalf("%d holds left, e.g. %v", len(left), left[0])
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for sid, w := range want {
		if !slices.Equal(fake.ops[sid], w) {
			t.Fatalf("%s ran %v, want %v", sid, fake.ops[sid], w)
		}
	}
}

var _ = api.CapAttach

// TestQueueBound: a connection that pipelines more waiting calls than
// its bounds (maxQueuedCalls calls; queuedBytesFactor × max_message_bytes
// of params) gets limit_exceeded for the excess (logged once), goes on
// being read, and runs everything it accepted once the session frees.
func TestQueueBound(t *testing.T) {
	pad := strings.Repeat("p", 1000-len(`{"sessionId":"s_aaaaaaaa","holderId":"h0000","pad":""}`))
	for _, tc := range []struct {
		name         string
		maxMsg, sent int
		accepted     int
		padded       bool
	}{
		{"calls", 1 << 20, maxQueuedCalls + 2, maxQueuedCalls, false},
		{"bytes", 4096, 20, queuedBytesFactor * 4096 / 1000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake()
			unblock := make(chan struct{})
			var once sync.Once
			fake.holdHook = func(ctx context.Context) error {
				once.Do(func() {
					select {
					case <-unblock:
					case <-ctx.Done():
					}
				})
				return nil
			}
			var closeOnce sync.Once
			release := func() { closeOnce.Do(func() { close(unblock) }) }
			t.Cleanup(release)
			ts := startServer(t, fake, func(o *ServerOptions) { o.MaxMessageBytes = tc.maxMsg })
			r := ts.raw(t, FramingLines)
			r.initializeAll()
			var msgs []string
			for i := 1; i <= tc.sent; i++ {
				padding := "" // an unknown field: it counts toward the bytes, not toward any field's bound
				if tc.padded {
					padding = pad
				}
				msgs = append(msgs, req(i, "agentSession.hold", fmt.Sprintf(`{"sessionId":"s_aaaaaaaa","holderId":"h%04d","pad":%q}`, i, padding)))
			}
			msgs = append(msgs, req(0, "daemon.status", `{}`))
			go r.nc.Write([]byte(r.frame(msgs...)))
			for want := tc.accepted + 1; want <= tc.sent; want++ {
				m := r.recv()
				e, _ := m["error"].(map[string]any)
				if m["id"] != float64(want) || e == nil || e["data"].(map[string]any)["reason"] != "limit_exceeded" {
					t.Fatalf("got %v, want limit_exceeded for call %v", m, want)
				}
			}
			if m := r.recv(); m["id"] != 0.0 || m["result"] == nil {
				t.Fatalf("status after the refusals: %v", m)
			}
			release()
			for i := 1; i <= tc.accepted; i++ {
				if m := r.recv(); m["id"] != float64(i) || m["result"] == nil {
					t.Fatalf("got %v, want the answer to hold %d", m, i)
				}
			}
			if n := ts.logs.count("call refused", "reason=limit_exceeded"); n != 1 {
				t.Fatalf("refusal logged %d times, want once", n)
			}
		})
	}
}
