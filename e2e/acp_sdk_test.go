package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/acptest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest/daemoncore"
)

// TestACPBridgeSDKEditor: the official ACP SDK (pinned 2.4.0, its
// ClientApp) as the editor over real `sessiond acp` processes: new, a
// prompt to echo, /work's permission round trip, list, then a second
// bridge's session/load replaying both turns once, close.
func TestACPBridgeSDKEditor(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	// SchemaPath is …/node_modules/@agentclientprotocol/sdk/schema/v1/schema.json.
	sdk := filepath.Dir(filepath.Dir(filepath.Dir(acptest.SchemaPath(t))))
	cwd := t.TempDir()
	cmd := exec.Command("node", filepath.Join("testdata", "acp", "editor.mjs"), sdk, daemontest.Binary(t), d.Socket, cwd)
	cmd.Env = append(daemoncore.CleanEnv(), "GORACE=atexit_sleep_ms=0")
	var stderr daemontest.SyncBuffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("the SDK editor: %v\n%s\n%s", err, b, stderr.String())
	}
	var out struct {
		Capabilities struct {
			LoadSession         bool                       `json:"loadSession"`
			SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
		}
		SessionID string
		Hello     struct{ StopReason, Text string }
		Work      struct {
			StopReason   string
			Permissions  int
			Kinds        []string
			ExecuteFinal []string
		}
		List []string
		Load struct {
			Users       []string
			Text        string
			Permissions int
		}
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	c := out.Capabilities
	if !c.LoadSession || c.SessionCapabilities["list"] == nil || c.SessionCapabilities["close"] == nil {
		t.Errorf("capabilities %s", b)
	}
	if out.Hello.StopReason != "end_turn" || !strings.Contains(out.Hello.Text, "hello sdk") {
		t.Errorf("hello: %+v", out.Hello)
	}
	w := out.Work
	want := []string{"agent_message_chunk", "agent_thought_chunk", "plan", "tool_call", "tool_call_update"}
	if w.StopReason != "end_turn" || w.Permissions != 1 || !subset(want, w.Kinds) || len(w.ExecuteFinal) == 0 || w.ExecuteFinal[len(w.ExecuteFinal)-1] != "completed" {
		t.Errorf("/work: %+v", w)
	}
	if !reflect.DeepEqual(out.List, []string{out.SessionID}) {
		t.Errorf("list %v, want [%s]", out.List, out.SessionID)
	}
	if l := out.Load; !reflect.DeepEqual(l.Users, []string{"hello sdk", "/work"}) || strings.Count(l.Text, "hello sdk") != 1 || l.Permissions != 0 {
		t.Errorf("load: %+v", l)
	}
}

func subset(want, got []string) bool {
	have := map[string]bool{}
	for _, g := range got {
		have[g] = true
	}
	for _, w := range want {
		if !have[w] {
			return false
		}
	}
	return true
}
