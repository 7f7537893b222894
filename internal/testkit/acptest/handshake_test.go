package acptest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// An agent that answers initialize with another protocolVersion, or never
// answers it within start_timeout, fails the hold with provider_failed
// naming why, and is stopped: nothing is left running. (The agents are
// shell scripts: the daemon's first request is initialize with id 1.)
func TestACPBadHandshake(t *testing.T) {
	for _, c := range []struct{ name, script, want string }{
		{"version", `read l; printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":2,"agentCapabilities":{},"authMethods":[]}}'; exec sleep 600`,
			"the agent speaks protocolVersion 2; sessiond speaks 1"},
		{"silent", `exec sleep 600`, "did not answer initialize"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := fmt.Sprintf("start_timeout = \"2s\"\n[providers.bad]\ncommand = [\"sh\", \"-c\", %q]\nprotocol = \"acp\"\n", c.script)
			d := daemontest.Start(t, daemontest.Options{Config: cfg})
			cl := providertest.Dial(t, d, client).C
			var info api.SessionInfo
			if err := cl.Call(providertest.Ctx(t), "agentSession.create", api.CreateParams{Provider: "bad", Cwd: t.TempDir()}, &info); err != nil {
				t.Fatal(err)
			}
			err := cl.Call(providertest.Ctx(t), "agentSession.hold", api.HoldParams{SessionID: info.SessionID, HolderID: "e2e"}, nil)
			var re *rpc.Error
			if !errors.As(err, &re) || re.Reason != "provider_failed" || !strings.Contains(err.Error()+fmt.Sprint(re.Data), c.want) {
				t.Fatalf("hold: %v (data %v), want provider_failed naming %q", err, re, c.want)
			}
			providertest.NoProcesses(t, d)
		})
	}
}
