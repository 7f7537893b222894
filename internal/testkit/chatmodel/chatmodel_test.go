package chatmodel_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/testkit/chatmodel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// post sends body and returns the SSE data lines of the answer.
func post(t *testing.T, url, body string) []string {
	t.Helper()
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			lines = append(lines, d)
		}
	}
	return lines
}

const turn = `{"model":"mock-model","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"bash"}}]}`

// TestScript: turn requests take the replies in order (text deltas, then
// a tool call ending with finish_reason tool_calls, then [DONE]); a
// request without tools takes none and is recorded aside; every turn's
// body is recorded.
func TestScript(t *testing.T) {
	m := chatmodel.New(t, chatmodel.Text("hel", "lo"), chatmodel.Call("c1", "bash", map[string]any{"command": "true"}))
	var text strings.Builder
	for _, d := range post(t, m.URL, turn) {
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if d != "[DONE]" && json.Unmarshal([]byte(d), &c) == nil && len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if text.String() != "hello" {
		t.Fatalf("text %q", text.String())
	}
	if side := post(t, m.URL, `{"stream":true,"messages":[]}`); len(side) == 0 || len(m.Side()) != 1 {
		t.Fatalf("side request: %v, %d recorded", side, len(m.Side()))
	}
	lines := post(t, m.URL, turn)
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, `"name":"bash"`) || !strings.Contains(all, `"finish_reason":"tool_calls"`) || lines[len(lines)-1] != "[DONE]" {
		t.Fatalf("tool call stream:\n%s", all)
	}
	if rs := m.Requests(); len(rs) != 2 || !strings.Contains(rs[1].Messages(), `"hi"`) {
		t.Fatalf("recorded %d turn requests", len(rs))
	}
}

// TestStall: a stalled reply streams its first delta and holds the stream
// open until released.
func TestStall(t *testing.T) {
	release := make(chan struct{})
	m := chatmodel.New(t, chatmodel.Stalled(release, "slow"))
	resp, err := http.Post(m.URL+"/chat/completions", "application/json", strings.NewReader(turn))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), `"slow"`) {
	}
	close(release)
	var rest strings.Builder
	for sc.Scan() {
		rest.WriteString(sc.Text())
	}
	if !strings.Contains(rest.String(), `" never"`) || !strings.Contains(rest.String(), "[DONE]") {
		t.Fatalf("after release: %s", rest.String())
	}
}
