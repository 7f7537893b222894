package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EConnectionResetLogged: a client that closes its connection with
// the daemon's reply unread in its socket (the kernel resets the
// connection: the daemon's next read is ECONNRESET), once between
// messages and once in the middle of one, is logged as
// "connection_reset", never "malformed_json", is no framing fault, and
// the daemon serves on.
func TestE2EConnectionResetLogged(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	faults := func() float64 {
		var st map[string]any
		if err := d.Client(t).Call(ctx10(t), "daemon.stats", nil, &st); err != nil {
			t.Fatal(err)
		}
		return st["framingFaults"].(float64)
	}
	before := faults()
	for i, tail := range []string{"", `{"jsonrpc":"2.0","id":2,"meth`} {
		r := dialRaw(t, d.Socket, false)
		r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
		r.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := r.nc.Read(make([]byte, 1)); err != nil { // the answer arrived; the rest of it stays unread
			t.Fatal(err)
		}
		r.write(tail)
		r.nc.Close()
		waitLogN(t, d, `"reason":"connection_reset"`, i+1)
	}
	if log := d.Log.String(); strings.Contains(log, `"reason":"malformed_json"`) || !strings.Contains(log, "connection reset by peer") {
		t.Fatalf("a reset logged as something else:\n%s", log)
	}
	if n := faults(); n != before {
		t.Fatalf("framingFaults went from %v to %v: a reset is no framing fault", before, n)
	}
}
