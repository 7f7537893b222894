package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/frametest"
	"go.uber.org/goleak"
)

// TestMain doubles as a helper process: SESSIOND_E2E_HELPER=peer dials a
// socket (as another uid) and reports whether the daemon answered.
func TestMain(m *testing.M) {
	if os.Getenv("SESSIOND_E2E_HELPER") == "peer" {
		os.Exit(peerHelper(os.Getenv("SESSIOND_E2E_SOCKET")))
	}
	goleak.VerifyTestMain(m)
}

// peerHelper: 0 = connection closed without an answer, 1 = answered,
// 2 = could not connect.
func peerHelper(path string) int {
	c, err := net.Dial("unix", path)
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 2
	}
	defer c.Close()
	io.WriteString(c, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil && len(b) == 0 {
		return 0
	}
	return 1
}

// rawConn is a hand-framed connection for bad-input tests.
type rawConn struct {
	t      *testing.T
	nc     net.Conn
	br     *bufio.Reader
	header bool
}

func dialRaw(t *testing.T, path string, header bool) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc), header: header}
}

func (r *rawConn) write(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.nc, s); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawConn) send(msg string) {
	r.t.Helper()
	r.write(frametest.Frame(msg, r.header))
}

func (r *rawConn) recv() map[string]any {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
	body, err := frametest.Read(r.br, r.header)
	if err != nil {
		r.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		r.t.Fatalf("bad message %q: %v", body, err)
	}
	return m
}

func (r *rawConn) expectClosed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
	b, err := r.br.ReadByte()
	if err == nil {
		r.t.Fatalf("got %q, want the connection closed", b)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		r.t.Fatal("connection still open after 15 s")
	}
}

// errOf returns (code, reason) of a JSON-RPC error message.
func errOf(m map[string]any) (float64, string) {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return 0, ""
	}
	d, _ := e["data"].(map[string]any)
	reason, _ := d["reason"].(string)
	code, _ := e["code"].(float64)
	return code, reason
}
