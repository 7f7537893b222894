package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// cutRelay stands between a bridge and the daemon (the bridge's --socket
// names it): it copies newline-framed JSON-RPC both ways and, on the
// first agentSession.send it sees, cuts the connection, once:
//   - before: without forwarding the send (the daemon never sees it);
//   - afterForward: right after forwarding it (the daemon may or may not
//     run it before it sees the connection end);
//   - afterAnswer: after forwarding it, once the daemon's answer to it
//     came back, which it drops (the daemon ran the send, the bridge
//     never hears of it; what the daemon wrote after the send is dropped
//     too).
//
// Every later connection is copied as it is.
type cutRelay struct {
	t      *testing.T
	ln     net.Listener
	target string
	mode   cutMode
	mu     sync.Mutex
	fired  bool
	conns  int
	cut    chan struct{} // closed when the cut happened
}

// cutMode is where a cutRelay cuts (its comment).
type cutMode int

const (
	cutBefore cutMode = iota
	cutAfterForward
	cutAfterAnswer
)

func startCutRelay(t *testing.T, target string, mode cutMode) *cutRelay {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(shortDir(t), "relay.sock"))
	if err != nil {
		t.Fatal(err)
	}
	r := &cutRelay{t: t, ln: ln, target: target, mode: mode, cut: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go r.serve()
	return r
}

func (r *cutRelay) socket() string { return r.ln.Addr().String() }

func (r *cutRelay) serve() {
	for {
		up, err := r.ln.Accept()
		if err != nil {
			return
		}
		down, err := net.Dial("unix", r.target)
		if err != nil {
			up.Close()
			continue
		}
		r.mu.Lock()
		r.conns++
		armed := !r.fired
		r.mu.Unlock()
		if !armed {
			go func() { io.Copy(down, up); down.(*net.UnixConn).CloseWrite() }()
			go func() { io.Copy(up, down); up.(*net.UnixConn).CloseWrite() }()
			continue
		}
		go r.inspect(up, down)
	}
}

// frame is what the relay reads of a line.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// inspect copies one connection line by line and cuts it at the send.
func (r *cutRelay) inspect(up, down net.Conn) {
	var (
		mu     sync.Mutex
		sendID []byte // set once the send was forwarded: drop, and cut at its answer
	)
	cut := func() {
		// fired first: the bridge's next dial, which the close sets off,
		// must find the relay disarmed.
		r.mu.Lock()
		if !r.fired {
			r.fired = true
			close(r.cut)
		}
		r.mu.Unlock()
		up.Close()
		down.Close()
	}
	go func() { // daemon -> bridge
		br := bufio.NewReaderSize(down, 1<<16)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				up.Close()
				return
			}
			mu.Lock()
			id := sendID
			mu.Unlock()
			if id == nil {
				if _, err := up.Write(line); err != nil {
					down.Close()
					return
				}
				continue
			}
			var f frame
			if json.Unmarshal(line, &f) == nil && f.Method == "" && bytes.Equal(f.ID, id) && (f.Result != nil || f.Error != nil) {
				cut()
				return
			}
		}
	}()
	br := bufio.NewReaderSize(up, 1<<16) // bridge -> daemon
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			down.Close()
			return
		}
		var f frame
		send := json.Unmarshal(line, &f) == nil && f.Method == "agentSession.send"
		if send && r.mode == cutBefore {
			cut()
			return
		}
		if send {
			mu.Lock()
			sendID = append([]byte(nil), f.ID...)
			mu.Unlock()
		}
		if _, err := down.Write(line); err != nil {
			up.Close()
			return
		}
		if send && r.mode == cutAfterForward {
			cut()
			return
		}
	}
}

// turnsStarted counts the turn.started events in a session's journal.
func turnsStarted(t *testing.T, c *rpc.Client, id string) (started, completed int) {
	t.Helper()
	after := uint64(0)
	for {
		var r api.ReadResult
		if err := c.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: id, AfterSeq: after, Limit: 4096}, &r); err != nil {
			t.Fatal(err)
		}
		for _, ev := range r.Events {
			switch ev.Type {
			case event.TurnStarted:
				started++
			case event.TurnCompleted:
				completed++
			}
			after = ev.Seq
		}
		if len(r.Events) == 0 || !r.HasMore {
			return started, completed
		}
	}
}

// TestACPBridgeSendRetriedOnce: the bridge's connection to the daemon is
// cut under its agentSession.send, by a relay of the test's own, at the
// places a send can be lost: after the daemon ran it and before its
// answer reached the bridge (afterAnswer), right after it was written
// (afterForward: whether the daemon runs it is the daemon's race with
// the connection's end), and before the daemon saw it (before). Either way the bridge dials again, sends again with the same
// clientMessageId, and the turn runs exactly once: one turn.started in
// the journal, the editor's prompt answered end_turn with the echo's
// text once. (Mutations: no retry -> the prompt answers an error, both
// cases; a fresh clientMessageId on the retry -> two turns, afterAnswer.)
func TestACPBridgeSendRetriedOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		mode cutMode
	}{{"afterAnswer", cutAfterAnswer}, {"afterForward", cutAfterForward}, {"before", cutBefore}} {
		t.Run(c.name, func(t *testing.T) {
			d := daemontest.Start(t, daemontest.Options{})
			r := startCutRelay(t, d.Socket, c.mode)
			e := startEditor(t, "--socket", r.socket())
			e.initialize()
			id := e.newSession(t.TempDir())
			const text = "once through a cut connection"
			ch := e.start("session/prompt", promptParams(id, text))
			<-r.cut
			m := e.wait(ch)
			var pr struct {
				StopReason string `json:"stopReason"`
			}
			json.Unmarshal(m.Result, &pr)
			if m.Error != nil || pr.StopReason != "end_turn" {
				t.Fatalf("the prompt whose send was cut: %+v %s; stderr:\n%s", m.Error, m.Result, e.stderrOf())
			}
			if got, want := joined(e.updates(), "agent_message_chunk"), "echo: "+text; got != want {
				t.Fatalf("the editor got %q, want %q once", got, want)
			}
			started, completed := turnsStarted(t, d.Client(t), id)
			if started != 1 || completed != 1 {
				t.Fatalf("the journal has %d turn.started and %d turn.completed, want the one turn", started, completed)
			}
			r.mu.Lock()
			conns := r.conns
			r.mu.Unlock()
			if conns < 2 || !strings.Contains(e.stderrOf(), "reconnected") {
				t.Fatalf("the bridge never dialled again (%d connections); stderr:\n%s", conns, e.stderrOf())
			}
		})
	}
}
