package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

var framings = []rpc.Framing{rpc.FramingLines, rpc.FramingHeader}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestE2EHandshakeAndGating: the real daemon negotiates capabilities in
// both framings and gates methods on them.
func TestE2EHandshakeAndGating(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	for _, f := range framings {
		t.Run(f.String(), func(t *testing.T) {
			c := d.ClientFraming(t, f, api.CapAttach)
			if !strings.HasPrefix(c.Init.ConnectionID, "c-") || c.Init.ProtocolVersion != 1 || len(c.Init.Capabilities) != len(rpc.Capabilities) {
				t.Fatalf("initialize = %+v", c.Init)
			}
			err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: "s_aaaaaaaa", HolderID: "h"}, nil)
			if !errors.Is(err, &rpc.Error{Reason: "capability_not_negotiated"}) {
				t.Fatalf("hold without capability: %v", err)
			}
			var st rpc.Status
			if err := c.Call(ctx10(t), "daemon.status", nil, &st); err != nil || st.StateID != d.StateID || st.Socket != d.Socket {
				t.Fatalf("status %+v %v", st, err)
			}
		})
	}
}

// TestE2EBadInput: every bad input gets its error (or a closed
// connection), and the daemon keeps serving every other client.
func TestE2EBadInput(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "max_message_bytes = 65536\n"})
	keeper := d.Client(t) // a client connected through all of it
	closes := []struct{ name, input string }{
		{"junk", "GET / HTTP/1.1\r\n\r\n"},
		{"binary junk", "\x00\x01\x02"},
		{"batch first", `[{"jsonrpc":"2.0","id":1,"method":"initialize"}]` + "\n"},
		{"absurd content-length", "Content-Length: 18446744073709551615\r\n\r\n"},
		{"over max_message_bytes", "Content-Length: 65537\r\n\r\n"},
		{"malformed json", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":}\n"},
		{"truncated line", "{\"jsonrpc\":\"2.0\",\"id\":1"},
		{"truncated body", "Content-Length: 50\r\n\r\n{\"jsonrpc\""},
	}
	for _, tc := range closes {
		t.Run("closes/"+tc.name, func(t *testing.T) {
			r := dialRaw(t, d.Socket, false)
			r.write(tc.input)
			if strings.HasPrefix(tc.name, "truncated") {
				r.nc.(interface{ CloseWrite() error }).CloseWrite()
			}
			r.expectClosed()
		})
	}
	cwd := t.TempDir()
	errs := []struct {
		name, msg string
		code      float64
		reason    string
	}{
		{"before initialize", `{"jsonrpc":"2.0","id":1,"method":"agentSession.list"}`, -32002, "not_initialized"},
		{"unsupported version", `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":7}}`, -32003, "unsupported_protocol"},
		{"initialize", `{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.attach.v1"]}}`, 0, ""},
		{"second initialize", `{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":1}}`, -32600, "already_initialized"},
		{"later batch", `[{"jsonrpc":"2.0","id":5,"method":"agentSession.list"}]`, -32600, "batch_not_supported"},
		{"unknown method", `{"jsonrpc":"2.0","id":6,"method":"agentSession.explode"}`, -32601, "method_not_found"},
		{"not negotiated", `{"jsonrpc":"2.0","id":7,"method":"agentSession.close","params":{"sessionId":"s_aaaaaaaa"}}`, -32601, "capability_not_negotiated"},
		{"wrong param type", `{"jsonrpc":"2.0","id":8,"method":"agentSession.get","params":{"sessionId":["x"]}}`, -32602, "invalid_params"},
		{"relative cwd", `{"jsonrpc":"2.0","id":9,"method":"agentSession.create","params":{"provider":"echo","cwd":"."}}`, -32602, "invalid_params"},
		{"path-like id", `{"jsonrpc":"2.0","id":10,"method":"agentSession.get","params":{"sessionId":"../../x"}}`, -32602, "invalid_params"},
		{"unknown session", `{"jsonrpc":"2.0","id":11,"method":"agentSession.get","params":{"sessionId":"s_nosuchsession"}}`, -32010, "session_not_found"},
		{"unknown provider", fmt.Sprintf(`{"jsonrpc":"2.0","id":12,"method":"agentSession.create","params":{"provider":"nope","cwd":%q}}`, cwd), -32020, "unknown_provider"},
	}
	for _, f := range framings {
		t.Run(f.String(), func(t *testing.T) {
			r := dialRaw(t, d.Socket, f == rpc.FramingHeader)
			for _, tc := range errs {
				r.send(tc.msg)
				m := r.recv()
				code, reason := errOf(m)
				if code != tc.code || reason != tc.reason {
					t.Fatalf("%s: got %v, want %v %s", tc.name, m, tc.code, tc.reason)
				}
			}
			r.send(`{"jsonrpc":"2.0","id":99,"method":"daemon.status"}`)
			if m := r.recv(); m["result"] == nil {
				t.Fatalf("status after errors: %v", m)
			}
		})
	}
	var st rpc.Status
	if err := keeper.Call(ctx10(t), "daemon.status", nil, &st); err != nil || st.PID != d.Cmd.Process.Pid {
		t.Fatalf("daemon stopped serving: %+v %v", st, err)
	}
	for _, want := range []string{"bad_framing", "batch_not_supported", "message_too_large", "malformed_json", "truncated_frame"} {
		if !strings.Contains(d.Log.String(), `"reason":"`+want+`"`) {
			t.Errorf("no log line with reason %s", want)
		}
	}
}

// TestE2ESocketModes: dir 0700, socket 0600.
func TestE2ESocketModes(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	di, err := os.Stat(filepath.Dir(d.Socket))
	if err != nil {
		t.Fatal(err)
	}
	si, err := os.Stat(d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 || si.Mode().Perm() != 0o600 {
		t.Fatalf("dir %v, socket %v; want 0700 and 0600", di.Mode(), si.Mode())
	}
}

// TestE2EOpenDirRefused: an existing socket dir open to others makes the
// daemon refuse to start, naming it.
func TestE2EOpenDirRefused(t *testing.T) {
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	code, out := runDaemonExpectExit(t, "--socket", filepath.Join(dir, "s.sock"), "--state-dir", t.TempDir())
	if code == 0 || !strings.Contains(out, dir) || !strings.Contains(out, "open to group or others") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

// TestE2EBadConfig: an unknown key or a bad duration stops the daemon
// with exit 1 and a message naming the key; a missing named file too.
func TestE2EBadConfig(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"unknown key", "idle_timeout = \"5s\"\nidel_timeout = \"5s\"\n", "idel_timeout"},
		{"bad duration", "[ladder]\nterm_timeout = \"two seconds\"\n", "ladder.term_timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "c.toml")
			os.WriteFile(cfg, []byte(tc.text), 0o600)
			code, out := runDaemonExpectExit(t, "--config", cfg, "--socket", filepath.Join(t.TempDir(), "s"), "--state-dir", t.TempDir())
			if code != exitcode.Error || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, output:\n%s", code, out)
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "missing.toml")
	code, out := runDaemonExpectExit(t, "--config", missing, "--state-dir", t.TempDir())
	if code != exitcode.Error || !strings.Contains(out, missing) {
		t.Fatalf("missing named config: exit %d, output:\n%s", code, out)
	}
}
