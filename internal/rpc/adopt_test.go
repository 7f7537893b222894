package rpc

import (
	"bufio"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/testkit/frametest"
)

// socketPair is a connected unix stream pair: the server's end (to
// adopt) and a raw client on the other.
func socketPair(t *testing.T, f Framing) (net.Conn, *raw) {
	t.Helper()
	// SOCK_CLOEXEC is Linux's; net.FileConn dups each end close-on-exec
	// and the originals are closed at once.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ncs [2]net.Conn
	for i, fd := range fds {
		file := os.NewFile(uintptr(fd), "pair")
		nc, err := net.FileConn(file)
		file.Close()
		if err != nil {
			t.Fatal(err)
		}
		ncs[i] = nc
	}
	t.Cleanup(func() { ncs[1].Close() })
	return ncs[0], &raw{t: t, nc: ncs[1], br: bufio.NewReader(ncs[1]), f: f}
}

// TestAdoptCaller: an upgrade's caller handed to the next image is served
// as initialized with its capabilities (those this server knows): the
// answer is its first frame, the previous image's unparsed bytes (a
// pipelined request, or the first half of one) are read before the
// socket's, a negotiated capability works and one not negotiated is
// refused, a second initialize is refused, and no initialize deadline
// applies.
// An id that is not JSON is refused with ErrAdoptCaller; id null is
// answered with id null.
func TestAdoptCaller(t *testing.T) {
	status := `{"jsonrpc":"2.0","id":2,"method":"daemon.status"}`
	for _, tc := range []struct {
		name    string
		f       Framing
		unread  string
		written string // what the client writes once the answer came
	}{
		{"lines, a whole request unread", FramingLines, frametest.Frame(status, false), ""},
		{"header, half a request unread", FramingHeader, frametest.Frame(status, true)[:30], frametest.Frame(status, true)[30:]},
		{"lines, nothing unread", FramingLines, "", frametest.Frame(status, false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An initialize deadline that would close a connection not
			// initialized before its first read.
			ts := startServer(t, newFake(), func(o *ServerOptions) { o.InitializeTimeout = time.Millisecond })
			nc, r := socketPair(t, tc.f)
			err := ts.srv.AdoptCaller(nc, AdoptedCaller{Framing: tc.f, ID: []byte(`"UP"`), Result: map[string]bool{"ok": true},
				Caps: []string{"agent-session.structured.hold.v1", "made-up.v9"}, Unread: []byte(tc.unread)})
			if err != nil {
				t.Fatal(err)
			}
			if m := r.recv(); m["id"] != "UP" || m["result"].(map[string]any)["ok"] != true {
				t.Fatalf("first frame %v, want the upgrade's answer", m)
			}
			r.write(tc.written)
			if m := r.recv(); m["id"] != float64(2) || m["result"] == nil {
				t.Fatalf("the request behind daemon.upgrade: %v", m)
			}
			r.send(`{"jsonrpc":"2.0","id":3,"method":"agentSession.hold","params":{"sessionId":"sess0001","holderId":"h"}}`)
			if m := r.recv(); m["result"] == nil {
				t.Fatalf("hold with structured.hold negotiated: %v", m)
			}
			r.send(`{"jsonrpc":"2.0","id":4,"method":"agentSession.attach","params":{"sessionId":"sess0001"}}`)
			if _, reason := errOfRaw(r.recv()); reason != "capability_not_negotiated" {
				t.Fatalf("attach, not negotiated: reason %q", reason)
			}
			r.send(`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1}}`)
			if _, reason := errOfRaw(r.recv()); reason != "already_initialized" {
				t.Fatalf("a second initialize: reason %q", reason)
			}
			if n := ts.logs.count("upgrade caller served on"); n != 1 {
				t.Fatalf("%d log lines for the adopted caller, want 1", n)
			}
		})
	}
	t.Run("bad id", func(t *testing.T) {
		ts := startServer(t, newFake(), nil)
		nc, r := socketPair(t, FramingLines)
		err := ts.srv.AdoptCaller(nc, AdoptedCaller{Framing: FramingLines, ID: []byte(`{`), Result: 1})
		if !errors.Is(err, ErrAdoptCaller) || !strings.Contains(err.Error(), "id {") {
			t.Fatalf("AdoptCaller with id %q: %v; want ErrAdoptCaller naming it", "{", err)
		}
		r.expectClosed()
	})
	t.Run("null id", func(t *testing.T) {
		ts := startServer(t, newFake(), nil)
		nc, r := socketPair(t, FramingLines)
		if err := ts.srv.AdoptCaller(nc, AdoptedCaller{Framing: FramingLines, ID: []byte(`null`), Result: 1}); err != nil {
			t.Fatalf("AdoptCaller with id null: %v", err)
		}
		if m := r.recv(); m["result"] != float64(1) || m["id"] != nil {
			t.Fatalf("the answer to an id-null caller: %v; want result 1 with id null", m)
		}
	})
}

// errOfRaw is (code, data.reason) of an error message.
func errOfRaw(m map[string]any) (float64, string) {
	e, _ := m["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	code, _ := e["code"].(float64)
	reason, _ := d["reason"].(string)
	return code, reason
}
