package rpc

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
)

// TestStatusEncodedAsMarshal: daemon.status's reply, built from bytes
// encoded once plus the counts, connections and providers of the call,
// is byte for byte json.Marshal of the Status, whatever the strings hold
// (quotes, `,"sessions":` inside a path, HTML characters, non-ASCII,
// control characters) and with the supervision set or not.
func TestStatusEncodedAsMarshal(t *testing.T) {
	// A field added to Status or SessionCounts must be added to
	// encodeStatus (status.go) and to this test.
	if n := reflect.TypeOf(Status{}).NumField(); n != 13 {
		t.Fatalf("Status has %d fields; encodeStatusWith writes 13", n)
	}
	if n := reflect.TypeOf(api.SessionCounts{}).NumField(); n != 2 {
		t.Fatalf("SessionCounts has %d fields; encodeStatus writes 2", n)
	}
	at := time.Date(2026, 11, 30, 18, 0, 0, 123456789, time.FixedZone("x", 3600))
	opts := []ServerOptions{
		{Version: "1.2.3", Socket: "/run/s.sock", StateDir: "/var/lib/sd", StateID: "abc", StartedAt: at},
		{Version: `v"<&>`, Socket: `/tmp/a,"sessions":1/s.sock`, StateDir: "/tmp/é\u2028\x01/,\"supervision\":{}", StateID: "",
			StartedAt: at, Supervision: api.Supervision{Mode: "cgroup", Reason: "writable <cgroup>", Cgroup: "/sys/fs/cgroup/x",
				Controllers: []string{"cpu", "memory"}, CgroupKill: true, MemoryMax: 1 << 30},
			Attention: func() api.AttentionStatus {
				return api.AttentionStatus{KeepAwake: api.KeepAwakeStatus{Reason: `no "logind" <here>`}, Notify: "none"}
			}},
	}
	calls := []struct {
		counts    api.SessionCounts
		conns     int
		providers []string
	}{
		{api.SessionCounts{}, 0, nil},
		{api.SessionCounts{Stored: 12, Live: 3}, 40, []string{"claude", "codex", "echo"}},
		{api.SessionCounts{Stored: 1 << 40, Live: -1}, 1, []string{`we"ird<>`, "naïve"}},
	}
	for i, o := range opts {
		s := NewServer(o)
		for j, c := range calls {
			raw := s.encodeStatus(c.counts, c.conns, c.providers)
			got := string(raw.buf[raw.off:])
			providers := c.providers
			if providers == nil {
				providers = []string{}
			}
			var attn *api.AttentionStatus
			if o.Attention != nil {
				a := o.Attention()
				attn = &a
			}
			wantB, err := json.Marshal(Status{
				Version: o.Version, ProtocolVersion: api.ProtocolVersion, PID: os.Getpid(),
				StartedAt: o.StartedAt.UTC().Format(time.RFC3339Nano), Socket: o.Socket,
				StateDir: o.StateDir, StateID: o.StateID, Sessions: c.counts,
				Connections: c.conns, Providers: providers, Attention: attn, Supervision: supervision(o.Supervision),
			})
			if err != nil {
				t.Fatal(err)
			}
			if got != string(wantB) {
				t.Fatalf("options %d, call %d:\ngot  %s\nwant %s", i, j, got, wantB)
			}
			id := requestID{Num: 7}
			resp, err := encodeResponse(&id, raw, nil)
			if err != nil || string(resp) != `{"id":7,"result":`+string(wantB)+`,"jsonrpc":"2.0"}` {
				t.Fatalf("response %s, %v", resp, err)
			}
			recycle(raw.buf)
			// With runtimes (a connection that negotiated runtimes.v1).
			rts := []api.RuntimeInfo{{RuntimeID: "r_1", Provider: `c"x`, Account: "default", PID: 9, Sessions: 2, StartedAt: at}}
			rb, _ := json.Marshal(rts)
			raw = s.encodeStatusWith(c.counts, c.conns, c.providers, append([]byte(`,"runtimes":`), rb...))
			wantR, _ := json.Marshal(Status{
				Version: o.Version, ProtocolVersion: api.ProtocolVersion, PID: os.Getpid(),
				StartedAt: o.StartedAt.UTC().Format(time.RFC3339Nano), Socket: o.Socket,
				StateDir: o.StateDir, StateID: o.StateID, Sessions: c.counts,
				Connections: c.conns, Providers: providers, Attention: attn, Runtimes: rts, Supervision: supervision(o.Supervision),
			})
			if got := string(raw.buf[raw.off:]); got != string(wantR) {
				t.Fatalf("options %d, call %d with runtimes:\ngot  %s\nwant %s", i, j, got, wantR)
			}
			recycle(raw.buf)
		}
	}
}
