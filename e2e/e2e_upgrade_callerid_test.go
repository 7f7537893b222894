package e2e

import (
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EUpgradeNullID: a daemon.upgrade sent with "id":null is a request
// (docs/protocol.md), so its caller is handed over like any other: the new
// image answers it with id null, in either framing, and serves the
// connection on.
func TestE2EUpgradeNullID(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{})
	for _, header := range []bool{false, true} {
		r := dialRaw(t, d.Socket, header)
		r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":["daemon.upgrade.v1"]}}`)
		if resp := r.recv(); resp["result"] == nil {
			t.Fatalf("initialize: %v", resp)
		}
		r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":null,"method":"daemon.upgrade","params":{"binary":%q}}`, v2))
		m := r.recv()
		for m["method"] == rpc.NotifyRestarting {
			m = r.recv()
		}
		id, hasID := m["id"]
		up, _ := m["result"].(map[string]any)
		if !hasID || id != nil || up == nil || up["toVersion"] != upgradeVersion {
			t.Fatalf("header=%v: the answer to an id-null upgrade: %v; want id null and the new image's result", header, m)
		}
		r.send(`{"jsonrpc":"2.0","id":2,"method":"daemon.status"}`)
		if st, _ := r.recv()["result"].(map[string]any); st == nil || st["version"] != upgradeVersion {
			t.Fatalf("header=%v: status on the caller's connection after the upgrade: %v", header, st)
		}
	}
}
