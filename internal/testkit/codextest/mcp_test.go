package codextest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// Roles this test binary plays when re-executed (TestMain).
const roleEnv = "CODEXTEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "mcp":
		// Scrub the environment and leave the process group, as some MCP
		// servers do: only the daemon's recorded tree can find us then.
		exe, _ := os.Executable()
		cmd := exec.Command(exe)
		cmd.Env = []string{roleEnv + "=mcp-scrubbed", "CODEXTEST_PIDFILE=" + os.Getenv("CODEXTEST_PIDFILE")}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Run(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case "mcp-scrubbed":
		stubbornMCP()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// stubbornMCP is a minimal MCP server on stdio that ignores SIGTERM and
// keeps running after stdin ends.
func stubbornMCP() {
	signalIgnoreTerm()
	_ = os.WriteFile(os.Getenv("CODEXTEST_PIDFILE"), []byte(strconv.Itoa(os.Getpid())), 0o600)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue
		}
		var res any
		switch m.Method {
		case "initialize":
			res = map[string]any{"protocolVersion": m.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "stubborn", "version": "1"}}
		case "tools/list":
			res = map[string]any{"tools": []any{}}
		default:
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "no"}})
			fmt.Println(string(b))
			continue
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": res})
		fmt.Println(string(b))
	}
	select {} // stdin ended: stay anyway
}

// (i) An MCP server configured in CODEX_HOME that ignores SIGTERM, scrubs
// its environment and leaves the process group: closing the session
// leaves no process.
func TestCodexStubbornMCPServer(t *testing.T) {
	m := codextest.NewModel(t)
	pidFile := filepath.Join(t.TempDir(), "mcp.pid")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mcp := fmt.Sprintf("\n[mcp_servers.stubborn]\ncommand = %q\nenv = { %s = \"mcp\", CODEXTEST_PIDFILE = %q }\n", exe, roleEnv, pidFile)
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, mcp)))
	s := providertest.NewSession(t, d, client, "codex", t.TempDir())
	s.Send(t, "hello")
	s.Next(t, event.TurnCompleted)
	pid := waitPidFile(t, pidFile)
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err != nil || strings.Contains(string(env), "SESSIOND_") {
		t.Fatalf("the MCP server should carry no session tags: %q %v", env, err)
	}
	s.Close(t)
	deadline := time.Now().Add(30 * time.Second)
	for providertest.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("MCP server %d still running after close\n%s", pid, d.Log.String())
		}
		time.Sleep(50 * time.Millisecond) // no signal for another process's exit
	}
	providertest.NoProcesses(t, d)
	if os.Getenv("CODEXTEST_LOG") != "" {
		t.Log(d.Log.String())
	}
}

func waitPidFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(providertest.WaitLong)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			pid, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the MCP server never started")
		}
		time.Sleep(50 * time.Millisecond) // written by another process
	}
}
