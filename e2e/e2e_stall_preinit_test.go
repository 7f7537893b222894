package e2e

import (
	"io"
	"net"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EFrameStalledBeforeInitialize: a partial first message that stops
// is closed at write_timeout when that comes before initialize_timeout,
// and logged frame_stalled, not initialize_timeout.
func TestE2EFrameStalledBeforeInitialize(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "write_timeout = \"400ms\"\ninitialize_timeout = \"5m\"\n"})
	part, err := net.Dial("unix", d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer part.Close()
	io.WriteString(part, `{"jsonrpc":"2.0","id":1,"meth`)
	waitClosed(t, part, "a first message stalled before initialize")
	waitLogN(t, d, `"reason":"frame_stalled"`, 1)
	if strings.Contains(d.Log.String(), `"reason":"initialize_timeout"`) {
		t.Fatalf("logged initialize_timeout for a stalled frame:\n%s", d.Log.String())
	}
}
