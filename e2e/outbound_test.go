package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// procKB reads a "Vm…: N kB" line of /proc/pid/status.
func procKB(t *testing.T, pid int, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

// TestE2EOutboundBudget: 200 connections that each read a page of about
// 1.9 MB (the flood's deltas and its message.completed) and never read
// the reply. The daemon closes the ones holding the
// most unwritten bytes once max_outbound_bytes is passed (logged), keeps
// its unwritten total under the bound and its peak RSS well under what
// holding every reply would take (200 × ~1.7 MB unwritten; not checked
// under the race detector), and answers daemon.status throughout.
func TestE2EOutboundBudget(t *testing.T) {
	const budget = 8 << 20
	const conns = 200
	// initialize_timeout: under -race on a loaded machine the daemon, busy
	// encoding 200 pages, may take longer than the default to answer one.
	d := daemontest.Start(t, daemontest.Options{Config: fmt.Sprintf("max_outbound_bytes = %d\nwrite_timeout = \"5m\"\ninitialize_timeout = \"60s\"\n", budget)})
	done := make(chan struct{})
	obs, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{OnNotify: func(method string, p json.RawMessage) {
		var n api.EventNotice
		if method == rpc.NotifyEvent && json.Unmarshal(p, &n) == nil && n.Event.Type == event.TurnCompleted {
			close(done)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	var s api.SessionInfo
	if err := obs.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := obs.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "obs"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := obs.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID, AfterSeq: 1}, nil); err != nil {
		t.Fatal(err)
	}
	// ~940 KB of deltas coalesced into ~16 KiB events, then the same text
	// in message.completed: one page of ~70 events.
	if err := obs.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "/flood 230 4096"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the flood's turn did not complete")
	}
	pid := d.Cmd.Process.Pid
	base := procKB(t, pid, "VmRSS")

	read := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"agentSession.read","params":{"sessionId":%q}}`, s.SessionID)
	for i := 0; i < conns; i++ {
		nc, err := net.Dial("unix", d.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		fmt.Fprintf(nc, "%s\n", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.attach.v1"]}}`)
		nc.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := bufio.NewReader(nc).ReadSlice('\n'); err != nil {
			t.Fatalf("conn %d (c-%d): initialize: %v\n%s", i, i+2, err, warnings(d.Log.String()))
		}
		fmt.Fprintf(nc, "%s\n", read) // and never read the reply
	}
	// Wait (on the daemon's own figures) until every read was answered,
	// i.e. its reply is held, partly written or dropped with its
	// connection.
	var stats map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st rpc.Status
		if err := obs.Call(ctx10(t), "daemon.status", nil, &st); err != nil {
			t.Fatalf("daemon.status while %d connections do not read: %v", conns, err)
		}
		if err := obs.Call(ctx10(t), "daemon.stats", nil, &stats); err != nil {
			t.Fatal(err)
		}
		rpcs, _ := stats["rpcs"].(map[string]any)
		if rpcs["agentSession.read"] == float64(conns) && stats["outboundBytes"].(float64) <= budget {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled: %v", stats)
		}
		time.Sleep(20 * time.Millisecond) // polling the daemon's state
	}
	rss, peak := procKB(t, pid, "VmRSS"), procKB(t, pid, "VmHWM")
	closes := stats["outboundCloses"].(float64)
	t.Logf("200 non-reading connections: RSS %d KiB (before %d KiB, peak %d KiB), unwritten %v B, closed %v",
		rss, base, peak, stats["outboundBytes"], closes)
	if closes == 0 {
		t.Fatal("no connection closed for the budget")
	}
	// Each closing is logged once: the log (read asynchronously from the
	// daemon's stderr) catches up with the counter, which may itself still
	// move while the last replies are encoded; wait for both to agree.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := obs.Call(ctx10(t), "daemon.stats", nil, &stats); err != nil {
			t.Fatal(err)
		}
		closes = stats["outboundCloses"].(float64)
		n := strings.Count(d.Log.String(), `"reason":"outbound_budget"`)
		if n == int(closes) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d closings logged, %v counted", n, closes)
		}
		time.Sleep(20 * time.Millisecond) // the log reader has no signal of its own
	}
	// Holding every reply would take ~340 MB beyond the kernel's socket
	// buffers (measured without the budget); the bound is the budget plus
	// pages being read and encoded.
	if raceBuild {
		return // the race detector multiplies memory: RSS says nothing here
	}
	if grown := peak - base; grown > 96<<10 {
		t.Fatalf("peak RSS grew by %d KiB with a %d KiB budget", grown, budget>>10)
	}
}

// warnings is what a failure shows of a long daemon log: its warnings
// and errors (each connection's framing and initialize lines would
// bury them).
func warnings(log string) string {
	var b strings.Builder
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
