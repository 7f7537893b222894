package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestACPStdoutEndsBeforeLive: an ACP agent that closes its stdout
// before its session is live and runs on (testdata/acp/closeout.sh): as
// initialize or session/new arrives the hold fails provider_failed naming
// the phase; right after its last answer (while the daemon makes the
// session live) it fails "before its session was live", or, ended just
// after, the live session is evicted. Either way the agent's process is
// stopped: nothing is left running.
func TestACPStdoutEndsBeforeLive(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("testdata", "acp", "closeout.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var cfg strings.Builder
	phases := []string{"initialize", "session/new", "answered"}
	for i, ph := range phases {
		fmt.Fprintf(&cfg, "[providers.close%d]\nprotocol = \"acp\"\ncommand = [\"sh\", %q, %q, %q]\n", i, script, ph, filepath.Join(dir, strconv.Itoa(i)))
	}
	d := daemontest.Start(t, daemontest.Options{Config: cfg.String()})
	c := d.Client(t)
	ctx := context.Background()
	for i, ph := range phases {
		var info api.SessionInfo
		if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "close" + strconv.Itoa(i), Cwd: t.TempDir()}, &info); err != nil {
			t.Fatal(err)
		}
		herr := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: info.SessionID, HolderID: "h"}, nil)
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("%s: the agent did not start: %v (hold: %v)", ph, err, herr)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		want := ph
		if ph == "answered" {
			// Its stdout ends as the daemon makes the session live: the hold
			// fails, or (ended just after) the live session is evicted.
			want = "before its session was live"
		}
		if (herr != nil || ph != "answered") && (herr == nil || !strings.Contains(herr.Error(), want) || !strings.Contains(herr.Error(), "stdout ended")) {
			t.Fatalf("%s: hold: %v", ph, herr)
		}
		if !exitsWithin(t, pid, 0, 60*time.Second) {
			t.Fatalf("%s: the agent %d still runs 60 s after its stdout ended (hold: %v)\n%s", ph, pid, herr, d.Log.String())
		}
	}
}
