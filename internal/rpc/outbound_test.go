package rpc

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
)

// TestOutboundBudget: connections that ask for large replies and never
// read them are closed, the one holding the most unwritten bytes first,
// once the unwritten total passes max_outbound_bytes; each closing is
// logged once; what is left stays under the bound, and another client is
// served meanwhile.
func TestOutboundBudget(t *testing.T) {
	const budget = 2 << 20
	fake := newFake()
	fake.readHook = func(api.ReadParams) api.ReadResult { return bigPage(1 << 20) }
	ts := startServer(t, fake, func(o *ServerOptions) {
		o.MaxOutboundBytes = budget
		o.WriteTimeout = time.Hour // only the budget may close them
	})
	const conns = 12
	rs := make([]*raw, conns)
	for i := range rs {
		rs[i] = ts.raw(t, FramingLines)
		rs[i].initialize()
		rs[i].send(`{"jsonrpc":"2.0","id":2,"method":"agentSession.read","params":{"sessionId":"s_aaaaaaaa"}}`)
	}
	// Each reply is ~1 MiB, of which the kernel takes a few hundred KiB:
	// 12 of them cannot all stay under 2 MiB. Wait (on the budget's
	// state) until every connection either holds its reply or was closed.
	waitState(t, func() bool {
		ts.srv.out.mu.Lock()
		defer ts.srv.out.mu.Unlock()
		n := int(ts.srv.out.closes.Load())
		for s := range ts.srv.out.streams {
			if !s.shed.Load() && s.pending.Load() > 0 {
				n++
			}
		}
		return n == conns
	})
	c := ts.client(t, FramingLines, nil, false)
	var stats map[string]any
	if err := call(t, c, "daemon.stats", nil, &stats); err != nil {
		t.Fatal(err)
	}
	closes := int(stats["outboundCloses"].(float64))
	if closes == 0 || closes == conns {
		t.Fatalf("%d of %d connections closed for the budget", closes, conns)
	}
	ts.logs.waitFor(t, closes, "over the outbound byte budget", "reason=outbound_budget")
	if got := ts.logs.count("over the outbound byte budget"); got != closes {
		t.Fatalf("%d closings logged, %d counted", got, closes)
	}
	// the shed connections' frames leave the count as their writes fail
	waitState(t, func() bool { return ts.srv.out.total.Load() <= budget })
	var st Status
	if err := call(t, c, "daemon.status", nil, &st); err != nil {
		t.Fatal(err)
	}
}

// waitState waits until cond holds (a state the server reaches; polled,
// as it has no signal of its own), or fails after 10 s.
func waitState(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("state not reached in 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOutboundBudgetSparesTheReader: the budget closes the slowest reader
// (the connection that has held unwritten bytes longest with no byte
// written), not the one with the most unwritten bytes: a client that asks
// for a large page and reads it is served while stalled connections with
// smaller replies hold the rest of the budget.
func TestOutboundBudgetSparesTheReader(t *testing.T) {
	const budget = 4 << 20
	fake := newFake()
	fake.readHook = func(p api.ReadParams) api.ReadResult {
		if p.AfterSeq == 1 {
			return bigPage(3500 << 10) // the reader's page
		}
		return bigPage(1 << 20)
	}
	ts := startServer(t, fake, func(o *ServerOptions) {
		o.MaxOutboundBytes = budget
		o.WriteTimeout = time.Hour // only the budget may close them
	})
	for range 3 {
		r := ts.raw(t, FramingLines)
		r.initialize()
		r.send(`{"jsonrpc":"2.0","id":2,"method":"agentSession.read","params":{"sessionId":"s_aaaaaaaa"}}`)
	}
	waitState(t, func() bool { // three stalled replies, their sockets full
		ts.srv.out.mu.Lock()
		defer ts.srv.out.mu.Unlock()
		n := 0
		for s := range ts.srv.out.streams {
			if p := s.pending.Load(); p > 0 && time.Since(time.Unix(0, s.since.Load())) > stallAfter {
				n++
			}
		}
		return n == 3
	})
	c := ts.client(t, FramingLines, nil, false)
	var r api.ReadResult
	if err := call(t, c, "agentSession.read", api.ReadParams{SessionID: "s_aaaaaaaa", AfterSeq: 1}, &r); err != nil {
		t.Fatalf("the reading client was closed for the budget: %v", err)
	}
	if closes := ts.srv.out.closes.Load(); closes == 0 {
		t.Fatal("no stalled connection was closed although the budget was exceeded")
	}
}

// TestOutboundVictim: which connection the budget closes, from the
// state of each (unwritten bytes, since when, nanosecond clock). A reply
// of 621 bytes being written to a reader that keeps up is not closed for
// being a moment older than a 2.2 MB frame for a connection that has
// not read yet; a stalled connection is closed before any that is not.
func TestOutboundVictim(t *testing.T) {
	now := time.Now()
	type st struct {
		name    string
		pending int64
		age     time.Duration
	}
	cases := []struct {
		name string
		max  int64
		conn []st
		want string
	}{
		{"fresh large frame, small reply in flight", 1 << 20,
			[]st{{"reader", 621, time.Millisecond}, {"big", 2215947, 0}}, "big"},
		{"stalled before fresh", 1 << 20,
			[]st{{"stalled1", 64 << 10, 5 * time.Second}, {"stalled2", 64 << 10, 3 * time.Second}, {"reader", 1 << 20, 0}}, "stalled1"},
		{"stalled: longest first, not most bytes", 1 << 20,
			[]st{{"old", 10 << 10, 9 * time.Second}, {"large", 1 << 20, 2 * time.Second}}, "old"},
		{"none stalled: most bytes", 1 << 20,
			[]st{{"a", 600 << 10, 300 * time.Millisecond}, {"b", 700 << 10, time.Millisecond}}, "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOutbound(tc.max, slog.New(slog.DiscardHandler))
			names := map[*stream]string{}
			for _, c := range tc.conn {
				a, b := net.Pipe()
				defer b.Close()
				s := newStream(a, nil, FramingLines, 0, 0)
				o.register(s, c.name)
				s.pending.Store(c.pending)
				s.since.Store(now.Add(-c.age).UnixNano())
				o.total.Add(c.pending)
				names[s] = c.name
			}
			o.shed()
			var shed []string
			for s, n := range names {
				if s.shed.Load() {
					shed = append(shed, n)
				}
			}
			if len(shed) != 1 || shed[0] != tc.want {
				t.Fatalf("closed %v, want [%s]", shed, tc.want)
			}
		})
	}
}

// TestOutboundBudgetSparesAFreshReader: connections that never read but
// are not stalled yet (a burst of them, younger than stallAfter: here
// stallAfter is an hour, so none ever is) hold the budget, and a client
// that reads asks for pages larger than theirs. The budget closes
// non-readers (their sockets hold bytes their peers never read), never
// the reader, although its reply is the largest when it is counted.
func TestOutboundBudgetSparesAFreshReader(t *testing.T) {
	const budget = 4 << 20
	fake := newFake()
	fake.readHook = func(p api.ReadParams) api.ReadResult {
		if p.AfterSeq == 1 {
			return bigPage(1200 << 10) // the reader's page
		}
		return bigPage(1 << 20)
	}
	ts := startServer(t, fake, func(o *ServerOptions) {
		o.MaxOutboundBytes = budget
		o.WriteTimeout = time.Hour // only the budget may close them
		o.stallAfter = time.Hour   // none is ever stalled: the kernel's count must tell
	})
	const conns = 6
	for range conns {
		r := ts.raw(t, FramingLines)
		r.initialize()
		r.send(`{"jsonrpc":"2.0","id":2,"method":"agentSession.read","params":{"sessionId":"s_aaaaaaaa"}}`)
	}
	// Every non-reader holds its reply (its socket full) or was closed.
	waitState(t, func() bool {
		ts.srv.out.mu.Lock()
		defer ts.srv.out.mu.Unlock()
		n := int(ts.srv.out.closes.Load())
		for s := range ts.srv.out.streams {
			if !s.shed.Load() && s.pending.Load() > 0 && peerUnread(s.conn) > 0 {
				n++
			}
		}
		return n == conns
	})
	c := ts.client(t, FramingLines, nil, false)
	for i := range 4 {
		var r api.ReadResult
		if err := call(t, c, "agentSession.read", api.ReadParams{SessionID: "s_aaaaaaaa", AfterSeq: 1}, &r); err != nil {
			t.Fatalf("read %d: the reading client was closed for the budget: %v", i, err)
		}
	}
	if closes := ts.srv.out.closes.Load(); closes == 0 {
		t.Fatal("no non-reader was closed although the budget was exceeded")
	}
}

// TestOutboundBudgetLoneLargeReply: at the least budget (1 MiB) a lone
// client that reads gets replies of 3 MiB, each whole, several in a row
// (a page holds at least one event, and one can be larger than the
// budget); nothing is closed for the budget.
func TestOutboundBudgetLoneLargeReply(t *testing.T) {
	fake := newFake()
	fake.readHook = func(api.ReadParams) api.ReadResult { return bigPage(3 << 20) }
	ts := startServer(t, fake, func(o *ServerOptions) { o.MaxOutboundBytes = 1 << 20 })
	c := ts.client(t, FramingLines, nil, false)
	for i := range 3 {
		var r api.ReadResult
		if err := call(t, c, "agentSession.read", api.ReadParams{SessionID: "s_aaaaaaaa"}, &r); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if n := ts.srv.out.closes.Load(); n != 0 {
		t.Fatalf("%d connections closed for the budget", n)
	}
}

// TestOutboundVictimFrameInTheKernel: a small reply the kernel has just
// taken (its bytes sit in the socket, unread by a peer that is about to
// read them, and the writer has not yet taken them out of the count) is
// not closed while fresh large frames not yet written hold the budget:
// the kernel's count says "left unread" only of a connection holding
// more than one write's worth. (The daemon closed a new connection's
// initialize reply so, in a burst of 200 non-readers under -race.)
func TestOutboundVictimFrameInTheKernel(t *testing.T) {
	now := time.Now().UnixNano()
	o := newOutbound(1<<20, slog.New(slog.DiscardHandler))
	nc, peer := socketPair(t, FramingLines)
	small := newStream(nc, nil, FramingLines, 0, 0)
	defer small.Close()
	reply := []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}` + "\n")
	if _, err := nc.Write(reply); err != nil { // in the kernel, not yet counted out
		t.Fatal(err)
	}
	o.register(small, "small")
	small.pending.Store(int64(len(reply)))
	small.since.Store(now)
	small.frames.Store(1)
	o.total.Add(int64(len(reply)))
	if peerUnread(nc) == 0 {
		t.Fatal("the socket holds no unread bytes: the case is not set up")
	}
	var big []*stream
	for range 3 { // without any one of them the others are still past max
		a, b := net.Pipe()
		defer b.Close()
		s := newStream(a, nil, FramingLines, 0, 0)
		o.register(s, "big")
		s.pending.Store(600 << 10)
		s.since.Store(now)
		s.frames.Store(1)
		o.total.Add(600 << 10)
		big = append(big, s)
	}
	o.shed()
	if small.shed.Load() {
		t.Fatal("closed the connection whose only reply is already in its socket")
	}
	if !big[0].shed.Load() && !big[1].shed.Load() && !big[2].shed.Load() {
		t.Fatal("closed none of the connections holding the budget")
	}
	peer.nc.Close()
}

// TestOutboundVictimSparesASlowReader: two connections not yet stalled
// hold the same unwritten bytes with their sockets holding bytes their
// peers have not read (both "left unread"): one peer reads slowly (it has
// read some of what was written since its stream began to hold bytes;
// its last progress is older), the other never reads (a burst's fresh
// connection). The one that never reads is closed. (A hostile probe saw
// both slow readers closed first, 0.33 s into a burst of 300.)
func TestOutboundVictimSparesASlowReader(t *testing.T) {
	now := time.Now()
	o := newOutbound(1<<20, slog.New(slog.DiscardHandler))
	// Two writes: the kernel counts a Unix socket's unread bytes by the
	// buffers its writes made (their size with overhead), each freed once
	// read whole; the slow reader has read the first.
	first, rest := make([]byte, 64<<10), make([]byte, 64<<10)
	const written = 128 << 10
	mk := func(name string, read bool, age time.Duration) *stream {
		nc, peer := socketPair(t, FramingLines)
		s := newStream(nc, nil, FramingLines, 0, 0)
		t.Cleanup(func() { s.Close() })
		for _, b := range [][]byte{first, rest} {
			if _, err := nc.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		if read {
			if _, err := io.ReadFull(peer.nc, make([]byte, len(first))); err != nil {
				t.Fatal(err)
			}
		}
		o.register(s, name)
		s.pending.Store(700 << 10)
		s.frames.Store(1)
		s.since.Store(now.Add(-age).UnixNano())
		s.sent.Store(written) // since it began to hold bytes (sentAt 0)
		o.total.Add(700 << 10)
		return s
	}
	slow := mk("slow reader", true, 300*time.Millisecond)
	never := mk("never reads", false, 0)
	if u, n := peerUnread(slow.conn), peerUnread(never.conn); u >= written || n < written {
		t.Fatalf("unread bytes: slow reader %d, never reads %d, of %d written: the case is not set up", u, n, written)
	}
	o.shed()
	if slow.shed.Load() || !never.shed.Load() {
		t.Fatalf("closed: slow reader %v, the one that never reads %v; want only the latter", slow.shed.Load(), never.shed.Load())
	}
}
