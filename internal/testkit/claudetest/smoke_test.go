package claudetest_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

// TestSmokeRealCLI: the pinned CLI, run with the offline environment
// against the scripted model, completes one streamed turn on its own
// (no daemon): system/init with a session_id, the text deltas, a result.
func TestSmokeRealCLI(t *testing.T) {
	bin := claudetest.Binary(t)
	m := claudetest.NewModel(t, claudetest.Text("hel", "lo"))
	cmd := exec.Command(bin, claudetest.Args...)
	env := os.Environ()
	for k, v := range claudetest.NewEnv(t, m.URL) {
		env = append(env, k+"="+v)
	}
	cmd.Env, cmd.Dir = env, t.TempDir()
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	msg, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": "say hello"}})
	if _, err := in.Write(append(msg, '\n')); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 8<<20)
	var sessionID, text string
	for sc.Scan() {
		t.Logf("%s", sc.Bytes())
		var l struct {
			Type      string `json:"type"`
			Subtype   string `json:"subtype"`
			SessionID string `json:"session_id"`
			Result    string `json:"result"`
			IsError   bool   `json:"is_error"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		if l.Type == "system" && l.Subtype == "init" {
			sessionID = l.SessionID
		}
		if l.Type == "result" {
			if l.IsError {
				t.Fatalf("result is an error: %s", sc.Bytes())
			}
			text = l.Result
			break
		}
	}
	if sessionID == "" || text != "hello" {
		t.Fatalf("session_id %q, result %q; stderr: %s", sessionID, text, stderr.String())
	}
	if n := len(m.Requests()); n != 1 {
		t.Fatalf("model saw %d streaming requests, want 1", n)
	}
	_ = in.Close()
}
