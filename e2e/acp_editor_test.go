package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/acptest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest/daemoncore"
)

// editor drives a real `sessiond acp` process the way an ACP client
// does: newline-delimited JSON-RPC on its stdio, every line both ways
// checked against the pinned SDK's ACP v1 schema.
type editor struct {
	t     testing.TB
	cmd   *exec.Cmd
	in    io.WriteCloser
	conf  *acptest.Conformance
	wmu   sync.Mutex
	mu    sync.Mutex
	next  int
	resp  map[string]chan acpMsg
	ups   chan acpUpdate
	perms chan acpMsg // session/request_permission requests
	exit  chan struct{}
	// pause, while held, stops the editor reading the bridge's stdout
	// (the pipe fills and the bridge's writes block).
	pause sync.Mutex
}

type acpMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type acpUpdate struct {
	at        time.Time // when the line arrived
	SessionID string    `json:"sessionId"`
	Update    struct {
		Kind       string          `json:"sessionUpdate"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"toolCallId"`
		ToolKind   string          `json:"kind"`
		Status     string          `json:"status"`
		Entries    []any           `json:"entries"`
	} `json:"update"`
}

// text is a chunk's text.
func (u acpUpdate) text() string {
	var c struct{ Text string }
	json.Unmarshal(u.Update.Content, &c)
	return c.Text
}

func startEditor(t testing.TB, args ...string) *editor {
	t.Helper()
	cmd := exec.Command(daemontest.Binary(t), append([]string{"acp"}, args...)...)
	cmd.Env = append(daemoncore.CleanEnv(), "GORACE=atexit_sleep_ms=0")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &daemontest.SyncBuffer{}
	e := &editor{t: t, cmd: cmd, in: in, conf: acptest.NewConformance(t), resp: map[string]chan acpMsg{},
		ups: make(chan acpUpdate, 10000), perms: make(chan acpMsg, 16), exit: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go e.read(out)
	t.Cleanup(func() {
		in.Close()
		select {
		case <-e.exit:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-e.exit
		}
	})
	return e
}

func (e *editor) read(out io.Reader) {
	defer func() {
		e.cmd.Wait()
		close(e.exit)
	}()
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 64<<20)
	for {
		e.pause.Lock()
		//lint:ignore SA2001 the lock is a gate: the test holds it while the editor must not read
		e.pause.Unlock()
		if !sc.Scan() {
			break
		}
		line, at := sc.Bytes(), time.Now()
		// A parse error's answer has id null (JSON-RPC 2.0 §5), which the
		// schema's answer types do not model: checked by the test itself.
		if err := e.conf.Check(acptest.Agent, line); err != nil && !strings.Contains(string(line), `"id":null`) {
			e.t.Errorf("sessiond acp wrote a line the ACP schema refuses: %v\n%s", err, line)
		}
		var m acpMsg
		if err := json.Unmarshal(line, &m); err != nil {
			e.t.Errorf("sessiond acp wrote no JSON: %s", line)
			continue
		}
		switch {
		case m.Method == "session/update":
			var u acpUpdate
			json.Unmarshal(m.Params, &u)
			u.at = at
			e.ups <- u
		case m.Method == "session/request_permission":
			e.perms <- m
		case m.Method == "":
			e.mu.Lock()
			ch := e.resp[string(m.ID)]
			e.mu.Unlock()
			if ch != nil {
				ch <- m
			} else if string(m.ID) == "null" {
				e.mu.Lock()
				ch = e.resp["null"]
				e.mu.Unlock()
				if ch != nil {
					ch <- m
				}
			}
		}
	}
}

func (e *editor) writeLine(b []byte, check bool) {
	if check {
		if err := e.conf.Check(acptest.Client, b); err != nil {
			e.t.Fatalf("the test editor's own line is not ACP: %v", err)
		}
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.in.Write(append(b, '\n'))
}

// start sends a request and returns the channel of its answer.
func (e *editor) start(method string, params any) <-chan acpMsg {
	e.mu.Lock()
	e.next++
	id := fmt.Sprint(e.next)
	ch := make(chan acpMsg, 1)
	e.resp[id] = ch
	e.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": e.next, "method": method, "params": params})
	e.writeLine(b, true)
	return ch
}

func (e *editor) wait(ch <-chan acpMsg) acpMsg {
	e.t.Helper()
	select {
	case m := <-ch:
		return m
	case <-e.exit:
		e.t.Fatalf("sessiond acp exited:\n%s", e.cmd.Stderr)
	case <-time.After(60 * time.Second):
		e.t.Fatalf("no answer within 60 s:\n%s", e.cmd.Stderr)
	}
	return acpMsg{}
}

// call sends a request and waits for a successful answer.
func (e *editor) call(method string, params any, result any) {
	e.t.Helper()
	m := e.wait(e.start(method, params))
	if m.Error != nil {
		e.t.Fatalf("%s: error %d %s", method, m.Error.Code, m.Error.Message)
	}
	if result != nil {
		if err := json.Unmarshal(m.Result, result); err != nil {
			e.t.Fatalf("%s: %v: %s", method, err, m.Result)
		}
	}
}

// callErr sends a request and wants an error answer.
func (e *editor) callErr(method string, params any) (int, string) {
	e.t.Helper()
	m := e.wait(e.start(method, params))
	if m.Error == nil {
		e.t.Fatalf("%s: want an error, got %s", method, m.Result)
	}
	return m.Error.Code, m.Error.Message
}

func (e *editor) notify(method string, params any) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	e.writeLine(b, true)
}

func (e *editor) initialize() {
	e.t.Helper()
	var r struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession         bool                       `json:"loadSession"`
			SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
	}
	e.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, &r)
	c := r.AgentCapabilities
	if r.ProtocolVersion != 1 || !c.LoadSession || c.SessionCapabilities["list"] == nil || c.SessionCapabilities["close"] == nil {
		e.t.Fatalf("initialize: %+v", r)
	}
}

func (e *editor) newSession(cwd string) string {
	e.t.Helper()
	var r struct {
		SessionID string `json:"sessionId"`
	}
	e.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}, &r)
	return r.SessionID
}

func promptParams(id, text string) map[string]any {
	return map[string]any{"sessionId": id, "prompt": []any{map[string]any{"type": "text", "text": text}}}
}

// updates drains the updates received so far (their lines came before
// the answer the caller waited for).
func (e *editor) updates() []acpUpdate {
	var out []acpUpdate
	for {
		select {
		case u := <-e.ups:
			out = append(out, u)
		default:
			return out
		}
	}
}

// joined is the concatenated text of the updates of one kind.
func joined(ups []acpUpdate, kind string) string {
	var b strings.Builder
	for _, u := range ups {
		if u.Update.Kind == kind {
			b.WriteString(u.text())
		}
	}
	return b.String()
}
