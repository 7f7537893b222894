package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":["daemon.admin.v1"]}}` + "\n"

// dialInit opens a raw connection and has initialize answered.
func dialInit(t *testing.T, sock string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	io.WriteString(nc, initLine)
	br := bufio.NewReader(nc)
	nc.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := br.ReadSlice('\n'); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	nc.SetReadDeadline(time.Time{})
	return nc, br
}

// waitLogN waits until the daemon's log holds substr n times.
func waitLogN(t *testing.T, d *daemontest.Daemon, substr string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(d.Log.String(), substr) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%q not logged %d times:\n%s", substr, n, d.Log.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the daemon's log
	}
}

// waitClosed waits until the daemon closes nc (a read ends).
func waitClosed(t *testing.T, nc net.Conn, what string) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, nc); err != nil {
		t.Fatalf("%s: not closed by the daemon: %v", what, err)
	}
}

// TestE2EMaxConnections: past max_connections new connections are
// refused (counted, logged at most once a second), at most the cap is
// open, and once some close a new client is served.
func TestE2EMaxConnections(t *testing.T) {
	const capN, extra = 8, 12
	d := daemontest.Start(t, daemontest.Options{Config: fmt.Sprintf("max_connections = %d\ninitialize_timeout = \"5m\"\n", capN)})
	var held []net.Conn
	for i := 0; i < capN; i++ {
		nc, _ := dialInit(t, d.Socket)
		held = append(held, nc)
	}
	for i := 0; i < extra; i++ {
		nc, err := net.Dial("unix", d.Socket)
		if err != nil {
			t.Fatal(err)
		}
		waitClosed(t, nc, fmt.Sprintf("connection %d past the cap", i))
		nc.Close()
	}
	held[0].Close()
	held[1].Close()
	var st map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("unix", d.Socket) // served once the closed ones are gone
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, initLine+`{"jsonrpc":"2.0","id":2,"method":"daemon.stats"}`+"\n")
		br := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := br.ReadSlice('\n'); err == nil {
			line, err := br.ReadString('\n')
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			var m struct{ Result map[string]any }
			if err := json.Unmarshal([]byte(line), &m); err != nil || m.Result == nil {
				t.Fatalf("daemon.stats: %q", line)
			}
			st = m.Result
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("no connection served after two closed")
		}
		time.Sleep(20 * time.Millisecond) // polling for the daemon to see the closes
	}
	open := st["connections"].(map[string]any)["open"].(float64)
	if open > capN {
		t.Fatalf("%v connections open with max_connections = %d", open, capN)
	}
	if refused := st["refusedConns"].(float64); refused < extra {
		t.Fatalf("refusedConns %v, want at least %d", refused, extra)
	}
	logged := strings.Count(d.Log.String(), `"reason":"max_connections"`)
	if logged < 1 || logged >= extra {
		t.Fatalf("refusals logged %d times for %d refused (want at least once, rate-limited)", logged, extra)
	}
}

// TestE2EInitializeTimeout: a connection that never initializes is closed
// after initialize_timeout, one stuck in a partial frame too, and it says
// why.
func TestE2EInitializeTimeout(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "initialize_timeout = \"300ms\"\n"})
	idle, err := net.Dial("unix", d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	part, err := net.Dial("unix", d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer part.Close()
	io.WriteString(part, "Content-Length: 4000\r\n\r\n{\"jsonrpc\":\"2.0\",")
	waitClosed(t, idle, "a connection without initialize")
	waitClosed(t, part, "a connection stopped inside its first frame")
	waitLogN(t, d, `"reason":"initialize_timeout"`, 2)
	// An initialized client may stay idle past it.
	nc, br := dialInit(t, d.Socket)
	io.WriteString(nc, `{"jsonrpc":"2.0","id":2,"method":"daemon.status"}`+"\n")
	if _, err := br.ReadSlice('\n'); err != nil {
		t.Fatal(err)
	}
	d.Status(t)
}

// TestE2EFrameStalled: an initialized connection that stops in the middle
// of a message is closed after write_timeout with no byte
// ("frame_stalled"); one idle between messages is not.
func TestE2EFrameStalled(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "write_timeout = \"400ms\"\n"})
	idle, ibr := dialInit(t, d.Socket)
	stuck, _ := dialInit(t, d.Socket)
	io.WriteString(stuck, `{"jsonrpc":"2.0","id":2,"method":"daemon.st`)
	waitClosed(t, stuck, "a connection stopped inside a message")
	waitLogN(t, d, `"reason":"frame_stalled"`, 1)
	io.WriteString(idle, `{"jsonrpc":"2.0","id":2,"method":"daemon.status"}`+"\n")
	idle.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := ibr.ReadSlice('\n'); err != nil {
		t.Fatalf("the idle connection: %v", err)
	}
}

// TestE2EPartialFrameMemory: 150 connections each send a header for a
// 1,000,000-byte message and 100 bytes of it. The daemon holds what they
// sent, not what they announced: its heap (daemon.stats heapBytes) grows
// by well under the 150 MB announced.
func TestE2EPartialFrameMemory(t *testing.T) {
	const conns = 150
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t, api.CapAdmin)
	heap := func() float64 {
		var st map[string]any
		if err := c.Call(ctx10(t), "daemon.stats", nil, &st); err != nil {
			t.Fatal(err)
		}
		return st["heapBytes"].(float64)
	}
	base := heap()
	init := strings.TrimSuffix(initLine, "\n")
	for i := 0; i < conns; i++ {
		nc, err := net.Dial("unix", d.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		// initialize and the partial frame in one write: once initialize is
		// answered, the daemon goes straight on to the buffered header.
		io.WriteString(nc, fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(init), init)+
			"Content-Length: 1000000\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"daemon.status\",\"params\":{\"x\":\""+strings.Repeat("a", 50))
		nc.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := bufio.NewReader(nc).ReadSlice('\n'); err != nil {
			t.Fatalf("conn %d: initialize: %v", i, err)
		}
	}
	grown := heap() - base
	t.Logf("%d connections in a partial frame of 100 bytes announced as 1 MB: heap grew by %.0f KiB", conns, grown/1024)
	if grown > 40<<20 {
		t.Fatalf("heap grew by %.0f KiB for %d partial frames of 100 bytes", grown/1024, conns)
	}
}

// TestE2EListNonReaders: 500 sessions with 4 KiB titles (one list reply
// is ~2.3 MB) and 40 connections that each pipeline three
// agentSession.list calls and never read. Every first reply passes
// max_outbound_bytes (1 MiB) and its connection is closed; the two calls
// already read behind it are not run (agentSession.list is answered 40
// times, not 120), and peak RSS stays far below 40 × 3 replies being
// built at once: under 64 MiB of growth, measured ~31 MiB (not checked
// under the race detector).
func TestE2EListNonReaders(t *testing.T) {
	const sessions, conns = 500, 40
	d := daemontest.Start(t, daemontest.Options{Config: "max_outbound_bytes = 1048576\nwrite_timeout = \"5m\"\n"})
	c := d.Client(t, api.CapAdmin)
	title := strings.Repeat("T", 4096)
	cwd := t.TempDir()
	for i := 0; i < sessions; i++ {
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: cwd, Title: title}, nil); err != nil {
			t.Fatal(err)
		}
	}
	pid := d.Cmd.Process.Pid
	base := procKB(t, pid, "VmHWM")
	list := `{"jsonrpc":"2.0","id":%d,"method":"agentSession.list","params":{"limit":500}}` + "\n"
	for i := 0; i < conns; i++ {
		nc, _ := dialInit(t, d.Socket)
		io.WriteString(nc, fmt.Sprintf(list, 2)+fmt.Sprintf(list, 3)+fmt.Sprintf(list, 4))
	}
	var st map[string]any
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := c.Call(ctx10(t), "daemon.stats", nil, &st); err != nil {
			t.Fatal(err)
		}
		if st["outboundCloses"].(float64) >= conns && st["connections"].(map[string]any)["open"].(float64) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled: %v", st)
		}
		time.Sleep(20 * time.Millisecond) // polling the daemon's state
	}
	peak := procKB(t, pid, "VmHWM")
	lists := st["rpcs"].(map[string]any)["agentSession.list"]
	t.Logf("%d connections × 3 pipelined lists of %d sessions: list answered %v times, peak RSS %d KiB (before %d KiB)",
		conns, sessions, lists, peak, base)
	if lists != float64(conns) {
		t.Fatalf("agentSession.list run %v times for %d connections closed after their first", lists, conns)
	}
	if raceBuild {
		return
	}
	if grown := peak - base; grown > 64<<10 {
		t.Fatalf("peak RSS grew by %d KiB", grown)
	}
}
