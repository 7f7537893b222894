package e2e

import (
	"context"
	"encoding/json"

	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// waitEvent reads a direct client's events until one of type typ.
func acpWaitEvent(t testing.TB, r *recorder, typ string) event.Event {
	t.Helper()
	for {
		select {
		case ev := <-r.ch:
			if ev.Type == typ {
				return ev
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("no %s within 60 s", typ)
		}
	}
}

// follow attaches a direct client to the session from its journal's end.
func follow(t testing.TB, socket, id string) (*rpc.Client, *recorder) {
	t.Helper()
	rec := newRecorder()
	dc, err := rpc.Dial(context.Background(), socket, rpc.ClientOptions{OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	var info api.SessionInfo
	if err := dc.Call(context.Background(), "agentSession.get", api.SessionParams{SessionID: id}, &info); err != nil {
		t.Fatal(err)
	}
	var a api.AttachResult
	if err := dc.Call(context.Background(), "agentSession.attach", api.AttachParams{SessionID: id, AfterSeq: info.LastSeq}, &a); err != nil {
		t.Fatal(err)
	}
	return dc, rec
}

// TestACPBridgeEditor: an editor over `sessiond acp` creates a session,
// prompts echo (streamed chunks, end_turn), runs /work with its permission
// round trip (tool calls with their final status, thoughts, the plan),
// cancels a turn, and meets bad input that never ends the bridge.
func TestACPBridgeEditor(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	e := startEditor(t, "--socket", d.Socket)
	e.initialize()
	if code, msg := e.callErr("initialize", map[string]any{"protocolVersion": 2}); code != -32602 || !strings.Contains(msg, "version 1") {
		t.Fatalf("protocolVersion 2: %d %s", code, msg)
	}
	cwd := t.TempDir()
	id := e.newSession(cwd)

	var pr struct {
		StopReason string `json:"stopReason"`
	}
	e.call("session/prompt", promptParams(id, "hello bridge"), &pr)
	if got := joined(e.updates(), "agent_message_chunk"); pr.StopReason != "end_turn" || !strings.Contains(got, "hello bridge") {
		t.Fatalf("prompt: stop %q, text %q", pr.StopReason, got)
	}

	// /work asks an approval: it comes as session/request_permission.
	ch := e.start("session/prompt", promptParams(id, "/work"))
	var perm acpMsg
	select {
	case perm = <-e.perms:
	case <-time.After(60 * time.Second):
		t.Fatal("/work: no session/request_permission within 60 s")
	}
	var pp struct {
		SessionID string `json:"sessionId"`
		Options   []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
	json.Unmarshal(perm.Params, &pp)
	allow := ""
	for _, o := range pp.Options {
		if o.Kind == "allow_once" {
			allow = o.OptionID
		}
	}
	if pp.SessionID != id || allow == "" {
		t.Fatalf("request_permission: %s", perm.Params)
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": perm.ID,
		"result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": allow}}})
	e.writeLine(b, true)
	m := e.wait(ch)
	json.Unmarshal(m.Result, &pr)
	ups := e.updates()
	kinds := map[string]int{}
	final := map[string]string{}
	for _, u := range ups {
		kinds[u.Update.Kind]++
		if u.Update.Kind == "tool_call_update" {
			final[u.Update.ToolKind] = u.Update.Status
		}
	}
	if m.Error != nil || pr.StopReason != "end_turn" || kinds["tool_call"] == 0 || kinds["plan"] == 0 ||
		kinds["agent_thought_chunk"] == 0 || final["execute"] != "completed" {
		t.Fatalf("/work: %+v stop %q kinds %v final %v", m.Error, pr.StopReason, kinds, final)
	}

	// Bad input: garbage, an unknown session, a huge prompt, a missing
	// cwd, and a second prompt while one runs; the bridge goes on.
	e.mu.Lock()
	nullCh := make(chan acpMsg, 1)
	e.resp["null"] = nullCh
	e.mu.Unlock()
	e.writeLine([]byte(`{not json`), false)
	if m := e.wait(nullCh); m.Error == nil || m.Error.Code != -32700 {
		t.Fatalf("garbage: %+v", m)
	}
	if code, _ := e.callErr("session/prompt", promptParams("nope", "x")); code != -32602 {
		t.Fatalf("unknown session: %d", code)
	}
	if code, msg := e.callErr("session/prompt", promptParams(id, strings.Repeat("x", 2<<20))); code != -32602 || !strings.Contains(msg, "bound") {
		t.Fatalf("huge prompt: %d %s", code, msg)
	}
	if code, _ := e.callErr("session/new", map[string]any{"cwd": filepath.Join(cwd, "missing"), "mcpServers": []any{}}); code != -32602 {
		t.Fatalf("missing cwd: %d", code)
	}

	_, rec := follow(t, d.Socket, id)
	running := e.start("session/prompt", promptParams(id, "/sleep 60000"))
	acpWaitEvent(t, rec, event.TurnStarted)
	if code, msg := e.callErr("session/prompt", promptParams(id, "second")); code != -32600 || !strings.Contains(msg, "already running") {
		t.Fatalf("second prompt: %d %s", code, msg)
	}
	e.notify("session/cancel", map[string]any{"sessionId": id})
	m = e.wait(running)
	json.Unmarshal(m.Result, &pr)
	if m.Error != nil || pr.StopReason != "cancelled" {
		t.Fatalf("cancel: %+v %s", m.Error, m.Result)
	}
	e.call("session/close", map[string]any{"sessionId": id}, nil)
}

// TestACPBridgeKillLoad: SIGKILL of the bridge mid-turn leaves the turn
// running to its end in the daemon (and the bridge's hold ends); a new
// bridge's session/load replays every turn once, including that one, and
// then goes live; session/list finds the session by cwd.
func TestACPBridgeKillLoad(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	e := startEditor(t, "--socket", d.Socket)
	e.initialize()
	cwd := t.TempDir()
	id := e.newSession(cwd)
	e.call("session/prompt", promptParams(id, "first turn"), nil)
	e.updates()

	dc, rec := follow(t, d.Socket, id)
	e.start("session/prompt", promptParams(id, "/sleep 2000 unattended"))
	acpWaitEvent(t, rec, event.TurnStarted)
	e.cmd.Process.Signal(syscall.SIGKILL)
	<-e.exit
	ev := acpWaitEvent(t, rec, event.TurnCompleted)
	var td event.TurnCompletedData
	json.Unmarshal(ev.Data, &td)
	if td.Status != event.StatusCompleted {
		t.Fatalf("the unattended turn ended %+v", td)
	}
	// The killed bridge's hold is gone.
	var info api.SessionInfo
	if err := dc.Call(context.Background(), "agentSession.get", api.SessionParams{SessionID: id}, &info); err != nil {
		t.Fatal(err)
	}
	for _, h := range info.Holders {
		if strings.HasPrefix(h, "acp:") {
			t.Fatalf("the killed bridge still holds: %v", info.Holders)
		}
	}

	e2 := startEditor(t, "--socket", d.Socket)
	e2.initialize()
	e2.call("session/load", map[string]any{"sessionId": id, "cwd": cwd, "mcpServers": []any{}}, nil)
	ups := e2.updates()
	var users []string
	for _, u := range ups {
		if u.Update.Kind == "user_message_chunk" {
			users = append(users, u.text())
		}
	}
	agent := joined(ups, "agent_message_chunk")
	if strings.Join(users, "|") != "first turn|/sleep 2000 unattended" ||
		strings.Count(agent, "first turn") != 1 || strings.Count(agent, "unattended") != 1 {
		t.Fatalf("load replay: users %q agent %q", users, agent)
	}
	var pr struct {
		StopReason string `json:"stopReason"`
	}
	e2.call("session/prompt", promptParams(id, "after load"), &pr)
	if got := joined(e2.updates(), "agent_message_chunk"); pr.StopReason != "end_turn" || !strings.Contains(got, "after load") {
		t.Fatalf("live after load: %q %q", pr.StopReason, got)
	}
	var lr struct {
		Sessions []struct {
			SessionID string `json:"sessionId"`
			Cwd       string `json:"cwd"`
		} `json:"sessions"`
	}
	e2.call("session/list", map[string]any{"cwd": cwd}, &lr)
	if len(lr.Sessions) != 1 || lr.Sessions[0].SessionID != id {
		t.Fatalf("list: %+v", lr)
	}
	e2.call("session/list", map[string]any{"cwd": t.TempDir()}, &lr)
	if len(lr.Sessions) != 0 {
		t.Fatalf("list of another cwd: %+v", lr)
	}
}

// TestACPBridgeStdinEOF: the editor closing the bridge's stdin mid-turn
// ends the bridge, never the turn: the daemon completes it.
func TestACPBridgeStdinEOF(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	e := startEditor(t, "--socket", d.Socket)
	e.initialize()
	id := e.newSession(t.TempDir())
	_, rec := follow(t, d.Socket, id)
	e.start("session/prompt", promptParams(id, "/sleep 2000 editor gone"))
	acpWaitEvent(t, rec, event.TurnStarted)
	e.in.Close()
	<-e.exit
	ev := acpWaitEvent(t, rec, event.TurnCompleted)
	var td event.TurnCompletedData
	json.Unmarshal(ev.Data, &td)
	if td.Status != event.StatusCompleted {
		t.Fatalf("the turn of an editor that went away ended %+v", td)
	}
}
