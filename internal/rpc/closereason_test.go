package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// closeCase is one way a client can end its connection, over a real
// socket, and the reason the server must log for it.
type closeCase struct {
	name   string
	f      Framing
	end    func(t *testing.T, r *raw)
	reason string
	msg    string // the log line's message
	errHas string // what the logged err names ("" for none)
	linux  bool   // what the kernel does is Linux's (a reset on close with unread data, EPIPE after SHUT_RD)
}

// unreadReply leaves most of a reply unread in the client's socket: the
// kernel then resets the connection when the client closes it.
func unreadReply(t *testing.T, r *raw) {
	t.Helper()
	r.send(`{"jsonrpc":"2.0","id":7,"method":"daemon.status"}`)
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.nc.Read(make([]byte, 1)); err != nil { // the reply has arrived; its rest stays unread
		t.Fatal(err)
	}
}

var closeCases = []closeCase{
	{"eof between messages", FramingLines, func(t *testing.T, r *raw) { r.nc.Close() },
		"peer_closed", "connection closed", "", false},
	{"reset between messages", FramingLines, func(t *testing.T, r *raw) { unreadReply(t, r); r.nc.Close() },
		"connection_reset", "connection closed", "connection reset by peer", true},
	{"reset mid-line", FramingLines, func(t *testing.T, r *raw) {
		unreadReply(t, r)
		r.write(`{"jsonrpc":"2.0","id":8,"meth`)
		r.nc.Close()
	}, "connection_reset", "connection closed", "connection reset by peer", true},
	{"reset mid-body", FramingHeader, func(t *testing.T, r *raw) {
		unreadReply(t, r)
		r.write("Content-Length: 100\r\n\r\n{\"jsonrpc\"")
		r.nc.Close()
	}, "connection_reset", "connection closed", "connection reset by peer", true},
	{"reset mid-header", FramingHeader, func(t *testing.T, r *raw) {
		unreadReply(t, r)
		r.write("Content-Len")
		r.nc.Close()
	}, "connection_reset", "connection closed", "connection reset by peer", true},
	{"eof mid-line", FramingLines, func(t *testing.T, r *raw) {
		r.write(`{"jsonrpc":"2.0","id":8,"meth`)
		r.nc.Close()
	}, "truncated_frame", "closing connection", "truncated", false},
	// The client stops reading (shutdown SHUT_RD) and asks for a reply:
	// the server's write fails with EPIPE.
	{"broken pipe on write", FramingHeader, func(t *testing.T, r *raw) {
		if err := r.nc.(*net.UnixConn).CloseRead(); err != nil {
			t.Fatal(err)
		}
		r.send(`{"jsonrpc":"2.0","id":9,"method":"daemon.status"}`)
	}, "peer_closed", "connection closed", "broken pipe", true},
}

// TestCloseReasons: each way a client ends its connection over a real
// socket is logged once, with the reason it is (a reset is not
// malformed_json), and the server goes on serving others.
func TestCloseReasons(t *testing.T) {
	for _, tc := range closeCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.linux && runtime.GOOS != "linux" {
				t.Skipf("the socket behaviour this case provokes is Linux's, not %s's", runtime.GOOS)
			}
			ts := startServer(t, newFake(), nil)
			r := ts.raw(t, tc.f)
			r.initialize()
			tc.end(t, r)
			ts.logs.waitFor(t, 1, "reason=")
			lines := ts.logs.matching("reason=")
			if len(lines) != 1 || !strings.Contains(lines[0], " "+tc.msg+" ") || !strings.Contains(lines[0]+" ", " reason="+tc.reason+" ") {
				t.Fatalf("logged %q, want one %q line with reason %s", lines, tc.msg, tc.reason)
			}
			if tc.errHas != "" && !strings.Contains(lines[0], tc.errHas) {
				t.Fatalf("logged %q, want its err to name %q", lines[0], tc.errHas)
			}
			c := ts.client(t, tc.f, nil, false)
			var st Status
			if err := call(t, c, "daemon.status", nil, &st); err != nil || st.PID == 0 {
				t.Fatalf("status after the close: %+v %v", st, err)
			}
		})
	}
}

// matching returns the lines that contain sub.
func (l *logRec) matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return out
}

// TestCloseReasonOf: the classification itself, over errors wrapped as
// the net package and the stream wrap them (the socket cases above
// cover what a Unix socket produces; a reset on write, an abort and an
// unknown error are only met here).
func TestCloseReasonOf(t *testing.T) {
	op := func(what string, errno syscall.Errno) error {
		return &net.OpError{Op: what, Net: "unix", Err: os.NewSyscallError(what, errno)}
	}
	timeout := func() string { return "frame_stalled" }
	var syntax error = new(json.SyntaxError)
	reads := []struct {
		err  error
		want string
	}{
		{nil, "closed"},
		{&net.OpError{Op: "read", Err: net.ErrClosed}, "closed"},
		{io.EOF, "peer_closed"},
		{op("read", syscall.ECONNRESET), "connection_reset"},
		{fmt.Errorf("10 bytes without newline: %w", op("read", syscall.ECONNRESET)), "connection_reset"},
		{op("read", syscall.ECONNABORTED), "connection_reset"},
		{op("read", syscall.EPIPE), "peer_closed"},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, "frame_stalled"},
		{fmt.Errorf("body of 100 bytes: %w", ErrTruncated), "truncated_frame"},
		{io.ErrUnexpectedEOF, "truncated_frame"},
		{fmt.Errorf("over 10 bytes: %w", ErrTooLarge), "message_too_large"},
		{fmt.Errorf("header: %w", ErrBadHeader), "bad_header"},
		{ErrBatchOpen, "batch_not_supported"},
		{fmt.Errorf("first byte: %w", ErrBadFraming), "bad_framing"},
		{fmt.Errorf("%w: %w", ErrMalformed, syntax), "malformed_json"},
		{syntax, "malformed_json"},
		{&json.UnmarshalTypeError{Value: "number"}, "malformed_json"},
		{op("read", syscall.EIO), "read_error"},
		{errors.New("something else"), "read_error"},
	}
	for _, tc := range reads {
		if got := readReason(tc.err, timeout); got != tc.want {
			t.Errorf("readReason(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	writes := []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "write", Err: os.ErrDeadlineExceeded}, "write_timeout"},
		{op("write", syscall.EPIPE), "peer_closed"},
		{op("write", syscall.ECONNRESET), "connection_reset"},
		{&net.OpError{Op: "write", Err: net.ErrClosed}, "closed"},
		{op("write", syscall.ENOBUFS), "write_error"},
	}
	for _, tc := range writes {
		if got := writeReason(tc.err); got != tc.want {
			t.Errorf("writeReason(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
