package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/claudetest"
	"github.com/sessiond/sessiond/internal/daemontest"
	"github.com/sessiond/sessiond/internal/rpc"
)

// TestE2EUpgradeQuiesceRefusal: a live session whose provider cannot be
// handed over (the pinned claude: its protocol has no adopter yet; no
// model is reached, it only starts) refuses the upgrade with upgrade_refused inside the host's quiesce.
// Everything frozen is let go: a call on a new connection works, the echo
// session still answers, and once that session is closed an upgrade
// succeeds.
func TestE2EUpgradeQuiesceRefusal(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	cfg := claudetest.ProviderTable("noadopt", claudetest.Binary(t), claudetest.NewEnv(t, "http://127.0.0.1:9"))
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	c := d.Client(t)
	echo, _ := liveSession(t, c)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "noadopt", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctxN(t, 60*time.Second), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, nil)
		var re *rpc.Error
		if !errors.As(err, &re) || re.Reason != "upgrade_refused" || !strings.Contains(fmt.Sprint(re.Data["cause"]), "cannot be handed over") {
			t.Fatalf("upgrade #%d with a session that cannot be handed over: %v (%v)\n%s", i, err, dataOf(re), d.Log.String())
		}
		if st := d.Status(t); st.Version == upgradeVersion {
			t.Fatalf("refused, yet the version is %s", st.Version)
		}
	}
	send(t, c, echo, "after the refusal")
	evs := waitJournal(t, func() *rpc.Client { return d.Client(t) }, echo, "turn.completed", turnDone)
	if got := deltaText(t, evs); got != "echo: after the refusal" {
		t.Fatalf("after the refusal the turn answered %q", got)
	}
	if err := c.Call(ctxN(t, 60*time.Second), "agentSession.close", api.SessionParams{SessionID: s.SessionID}, nil); err != nil {
		t.Fatalf("close: %v", err)
	}
	var res api.UpgradeResult
	if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil {
		t.Fatalf("upgrade once the session is closed: %v\n%s", err, d.Log.String())
	}
	if st := d.Status(t); st.Version != upgradeVersion {
		t.Fatalf("after the upgrade: version %s", st.Version)
	}
}
