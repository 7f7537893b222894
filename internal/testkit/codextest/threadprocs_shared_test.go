package codextest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/testkit/clitest"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// rpcLine is one JSON-RPC message of codex app-server's stdio.
type rpcLine struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// One codex process serving two threads (what a shared runtime is): each
// thread's command carries its own thread's id, so the mark tells the two
// threads' commands apart inside one process. codex is driven straight
// over its stdio here: the daemon's account mode is not built yet.
func TestCodexThreadCommandsOneProcess(t *testing.T) {
	dir := t.TempDir()
	pids := []string{filepath.Join(dir, "1"), filepath.Join(dir, "2")}
	m := codextest.NewModel(t, codextest.Exec("call_1", sleeper(pids[0])), codextest.Exec("call_2", sleeper(pids[1])))
	cmd := exec.Command(codextest.Binary(t), "app-server")
	// Tagged as the daemon tags a shared runtime, so ThreadCommands scans
	// its tree only.
	scope := proc.Tags{RuntimeID: "r_codextest", StateID: fmt.Sprintf("codextest-%d", os.Getpid())}
	cmd.Env = append(os.Environ(), "CODEX_HOME="+codextest.Home(t, m.URL, ""), "HOME="+t.TempDir())
	cmd.Env = append(cmd.Env, scope.Env()...)
	cmd.Dir = t.TempDir()
	in, out := clitest.Start(t, cmd)
	lines := make(chan rpcLine, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var l rpcLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				lines <- l
			}
		}
	}()
	var threads []string
	t.Cleanup(func() {
		for _, th := range threads {
			left, _ := codextest.ThreadCommands(scope, th)
			for _, p := range left {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		for range lines {
		}
	})
	enc := json.NewEncoder(in)
	nextID := 0
	// call sends a request and answers codex's approval requests until its
	// response comes.
	call := func(method string, params any) json.RawMessage {
		t.Helper()
		nextID++
		id := json.RawMessage(strconv.Quote(fmt.Sprintf("t%d", nextID)))
		if err := enc.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("codex closed its stdout during %s", method)
				}
				if string(l.ID) == string(id) && l.Method == "" {
					if l.Error != nil {
						t.Fatalf("%s: %s", method, l.Error)
					}
					return l.Result
				}
				approve(t, enc, l)
			case <-providertest.Ctx(t).Done():
				t.Fatalf("no answer to %s", method)
			}
		}
	}
	call("initialize", map[string]any{"clientInfo": map[string]any{"name": "codextest", "version": "0"}})
	if err := enc.Encode(map[string]any{"jsonrpc": "2.0", "method": "initialized"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		var r struct {
			Thread struct {
				ID string `json:"id"`
			} `json:"thread"`
		}
		if err := json.Unmarshal(call("thread/start", map[string]any{"cwd": cmd.Dir}), &r); err != nil || r.Thread.ID == "" {
			t.Fatalf("thread/start: %v", err)
		}
		threads = append(threads, r.Thread.ID)
	}
	for _, th := range threads {
		call("turn/start", map[string]any{"threadId": th, "input": []map[string]any{{"type": "text", "text": "run it"}}})
	}
	// Approve both commands as codex asks, until both have written their pid.
	for _, p := range pids {
		for {
			if _, err := os.Stat(p); err == nil {
				break
			}
			select {
			case l := <-lines:
				approve(t, enc, l)
			case <-providertest.Ctx(t).Done():
				t.Fatalf("%s never appeared", p)
			}
		}
	}
	var all []int
	for i, th := range threads {
		got, err := codextest.ThreadCommands(scope, th)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("thread %d (%s): marked %v, want its one command", i, th, got)
		}
		all = append(all, got...)
	}
	var want []int
	for _, p := range pids {
		b, _ := os.ReadFile(p)
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err != nil {
			t.Fatal(err)
		}
		want = append(want, pid)
	}
	slices.Sort(all)
	slices.Sort(want)
	if !slices.Equal(all, want) || all[0] == all[1] {
		t.Fatalf("the two threads' marked commands %v, want the two commands %v, one each", all, want)
	}
	native := childOf(t, cmd.Process.Pid)
	for _, p := range all {
		if ppid, _, _ := statFields(t, p); ppid != native {
			t.Fatalf("command %d's parent is %d, want the one codex %d", p, ppid, native)
		}
	}
}

// approve answers a command approval request with accept; anything else
// is left alone.
func approve(t *testing.T, enc *json.Encoder, l rpcLine) {
	t.Helper()
	if l.Method == "item/commandExecution/requestApproval" && l.ID != nil {
		if err := enc.Encode(map[string]any{"jsonrpc": "2.0", "id": l.ID, "result": map[string]any{"decision": "accept"}}); err != nil {
			t.Fatal(err)
		}
	}
}
