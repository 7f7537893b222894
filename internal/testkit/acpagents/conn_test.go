package acpagents_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/acpagents"
)

// wait bounds each wait on an agent (slow starts on a loaded 2-core
// machine); no test asserts speed.
const wait = 3 * time.Minute

// msg is one JSON-RPC message from the agent.
type msg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// update is a session/update's params.
type update struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		Kind    string `json:"sessionUpdate"`
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"update"`
}

// conn drives one agent process over its stdio with newline-delimited
// JSON-RPC, as the daemon would: the test's calls, the agent's
// notifications and requests in one ordered stream (In), and -32601 for
// agent requests other than session/request_permission.
type conn struct {
	t      testing.TB
	cmd    *exec.Cmd
	mu     sync.Mutex
	w      *os.File
	nextID int
	calls  map[string]chan msg
	in     chan msg
	exited chan struct{}
	stderr *tail
}

// tail keeps the last 8 KiB written to it.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (l *tail) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b = append(l.b, p...)
	if len(l.b) > 8<<10 {
		l.b = l.b[len(l.b)-8<<10:]
	}
	l.mu.Unlock()
	return len(p), nil
}

func (l *tail) String() string { l.mu.Lock(); defer l.mu.Unlock(); return string(l.b) }

// start runs the recipe in cwd in a process group of its own, killed
// (the whole group) when the test ends.
func start(t testing.TB, r acpagents.Recipe, cwd string) *conn {
	t.Helper()
	cmd := exec.Command(r.Command[0], r.Command[1:]...)
	cmd.Dir = cwd
	cmd.Env = os.Environ()
	for k, v := range r.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = groupAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{t: t, cmd: cmd, calls: map[string]chan msg{}, in: make(chan msg, 1<<14),
		exited: make(chan struct{}), stderr: &tail{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", r.Command[0], err)
	}
	c.w = stdin.(*os.File)
	read := make(chan struct{})
	go func() {
		defer close(read)
		c.read(bufio.NewReaderSize(stdout, 1<<20))
	}()
	go func() { <-read; _ = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		c.kill()
		<-c.exited
		if t.Failed() {
			t.Logf("agent stderr (tail): %s", c.stderr)
		}
	})
	return c
}

// kill ends the agent's whole process group.
func (c *conn) kill() { _ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) }

func (c *conn) read(r *bufio.Reader) {
	for {
		line, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var m msg
			if json.Unmarshal(line, &m) == nil {
				c.dispatch(m)
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *conn) dispatch(m msg) {
	switch {
	case m.Method == "" && len(m.ID) > 0: // a result of our call
		c.mu.Lock()
		ch := c.calls[string(m.ID)]
		delete(c.calls, string(m.ID))
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	case len(m.ID) > 0 && m.Method != "session/request_permission":
		c.send(map[string]any{"jsonrpc": "2.0", "id": m.ID,
			"error": map[string]any{"code": -32601, "message": "method not found: " + m.Method}})
	default:
		c.in <- m
	}
}

func (c *conn) send(v any) {
	b, _ := json.Marshal(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.w.Write(append(b, '\n'))
}

// call sends a request and returns the channel its answer arrives on.
func (c *conn) call(method string, params any) <-chan msg {
	ch := make(chan msg, 1)
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprint(c.nextID)
	c.calls[id] = ch
	c.mu.Unlock()
	c.send(map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method, "params": params})
	return ch
}

// result waits for a call's answer and decodes its result into v; an
// error answer fails the test.
func (c *conn) result(ch <-chan msg, what string, v any) {
	c.t.Helper()
	select {
	case m := <-ch:
		if m.Error != nil {
			c.t.Fatalf("%s: error %d %s", what, m.Error.Code, m.Error.Message)
		}
		if v != nil {
			if err := json.Unmarshal(m.Result, v); err != nil {
				c.t.Fatalf("%s: %v in %s", what, err, m.Result)
			}
		}
	case <-c.exited:
		c.t.Fatalf("%s: the agent exited", what)
	case <-time.After(wait):
		c.t.Fatalf("%s: no answer within %s", what, wait)
	}
}

// notify sends a notification.
func (c *conn) notify(method string, params any) {
	c.send(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

// respond answers the agent's request id.
func (c *conn) respond(id json.RawMessage, result any) {
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// drain returns what the agent sent until ch answers (a prompt's result):
// the concatenated agent_message_chunk text and the answer; each
// permission request goes to onPermission, each chunk's text to onChunk
// when set.
func (c *conn) drain(ch <-chan msg, what string, onPermission func(m msg)) (text string, answer msg) {
	c.t.Helper()
	return c.drainChunks(ch, what, onPermission, nil)
}

func (c *conn) drainChunks(ch <-chan msg, what string, onPermission func(m msg), onChunk func(text string)) (text string, answer msg) {
	c.t.Helper()
	var b strings.Builder
	for {
		select {
		case m := <-c.in:
			switch m.Method {
			case "session/update":
				var u update
				if json.Unmarshal(m.Params, &u) == nil && u.Update.Kind == "agent_message_chunk" {
					b.WriteString(u.Update.Content.Text)
					if onChunk != nil {
						onChunk(u.Update.Content.Text)
					}
				}
			case "session/request_permission":
				if onPermission == nil {
					c.t.Fatalf("%s: unexpected permission request %s", what, m.Params)
				}
				onPermission(m)
			}
		case m := <-ch:
			if m.Error != nil {
				c.t.Fatalf("%s: error %d %s", what, m.Error.Code, m.Error.Message)
			}
			return b.String(), m
		case <-c.exited:
			c.t.Fatalf("%s: the agent exited", what)
		case <-time.After(wait):
			c.t.Fatalf("%s: no answer within %s", what, wait)
		}
	}
}
