package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// waitPerm waits for the editor's next permission request.
func waitPerm(t *testing.T, e *editor) acpMsg {
	t.Helper()
	select {
	case m := <-e.perms:
		return m
	case <-time.After(60 * time.Second):
		t.Fatal("no session/request_permission within 60 s")
	}
	return acpMsg{}
}

// answerPermission waits for the editor's next permission request and
// answers it with the option of that kind ("" = the cancelled outcome).
func answerPermission(t *testing.T, e *editor, kind string) {
	t.Helper()
	m := waitPerm(t, e)
	outcome := map[string]any{"outcome": "cancelled"}
	if kind != "" {
		var p struct {
			Options []struct{ OptionID, Kind string }
		}
		json.Unmarshal(m.Params, &p)
		for _, o := range p.Options {
			if o.Kind == kind {
				outcome = map[string]any{"outcome": "selected", "optionId": o.OptionID}
			}
		}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"outcome": outcome}})
	e.writeLine(b, true)
}

// TestACPBridgeLoadApprovals: an approval still open when its bridge was
// killed is asked again by the next bridge's load (and answered, the turn
// completes); an answered one is never asked again; an interrupted turn's
// partial output (its thoughts, its plan) is in the replay.
func TestACPBridgeLoadApprovals(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	e1 := startEditor(t, "--socket", d.Socket)
	e1.initialize()
	cwd := t.TempDir()
	id := e1.newSession(cwd)
	_, rec := follow(t, d.Socket, id)
	e1.start("session/prompt", promptParams(id, "/work"))
	waitPerm(t, e1) // asked, never answered: the bridge dies
	e1.cmd.Process.Signal(syscall.SIGKILL)
	<-e1.exit

	e2 := startEditor(t, "--socket", d.Socket)
	e2.initialize()
	load := e2.start("session/load", map[string]any{"sessionId": id, "cwd": cwd, "mcpServers": []any{}})
	answerPermission(t, e2, "allow_once") // the open approval, asked again
	e2.wait(load)
	ev := acpWaitEvent(t, rec, event.TurnCompleted)
	var td event.TurnCompletedData
	json.Unmarshal(ev.Data, &td)
	if td.Status != event.StatusCompleted {
		t.Fatalf("the approved turn ended %+v", td)
	}

	// A second /work, cancelled while its approval waits: interrupted.
	ch := e2.start("session/prompt", promptParams(id, "/work"))
	waitPerm(t, e2)
	e2.notify("session/cancel", map[string]any{"sessionId": id})
	var pr struct {
		StopReason string `json:"stopReason"`
	}
	json.Unmarshal(e2.wait(ch).Result, &pr)
	if pr.StopReason != "cancelled" {
		t.Fatalf("cancelled /work: %q", pr.StopReason)
	}

	e3 := startEditor(t, "--socket", d.Socket)
	e3.initialize()
	e3.call("session/load", map[string]any{"sessionId": id, "cwd": cwd, "mcpServers": []any{}}, nil)
	ups := e3.updates()
	var users []string
	plans, thoughts := 0, 0
	final := []string{}
	for _, u := range ups {
		switch u.Update.Kind {
		case "user_message_chunk":
			users = append(users, u.text())
		case "plan":
			plans++
		case "agent_thought_chunk":
			thoughts++
		case "tool_call_update":
			if u.Update.ToolKind == "execute" {
				final = append(final, u.Update.Status)
			}
		}
	}
	if strings.Join(users, "|") != "/work|/work" || plans < 2 || thoughts < 2 || len(final) == 0 || final[0] != "completed" {
		t.Fatalf("replay: users %q plans %d thoughts %d execute %v", users, plans, thoughts, final)
	}
	select {
	case m := <-e3.perms:
		t.Fatalf("an answered approval asked again: %s", m.Params)
	default:
	}
}
