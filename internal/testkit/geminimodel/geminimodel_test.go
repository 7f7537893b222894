package geminimodel_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/testkit/geminimodel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const turn = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`

// stream posts a turn and returns the SSE data lines of the answer.
func stream(t *testing.T, url, body string) []string {
	t.Helper()
	resp, err := http.Post(url+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "data: "); ok {
			lines = append(lines, d)
		}
	}
	return lines
}

// TestScript: turn requests take the replies in order (text parts, the
// last with finishReason STOP; then a functionCall part); a request
// without tools takes none; every turn's body is recorded.
func TestScript(t *testing.T) {
	m := geminimodel.New(t, geminimodel.Text("hel", "lo"), geminimodel.Call("run_shell_command", map[string]any{"command": "true"}))
	var text strings.Builder
	lines := stream(t, m.URL, turn)
	for _, d := range lines {
		var r struct {
			Candidates []struct {
				Content struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"content"`
			} `json:"candidates"`
		}
		if json.Unmarshal([]byte(d), &r) == nil && len(r.Candidates) > 0 {
			for _, p := range r.Candidates[0].Content.Parts {
				text.WriteString(p.Text)
			}
		}
	}
	if text.String() != "hello" || !strings.Contains(lines[len(lines)-1], `"finishReason":"STOP"`) {
		t.Fatalf("text %q, last %s", text.String(), lines[len(lines)-1])
	}
	if side := stream(t, m.URL, `{"contents":[]}`); len(side) == 0 || len(m.Side()) != 1 {
		t.Fatalf("side request: %v, %d recorded", side, len(m.Side()))
	}
	if all := strings.Join(stream(t, m.URL, turn), "\n"); !strings.Contains(all, `"functionCall":{"args":{"command":"true"},"name":"run_shell_command"}`) {
		t.Fatalf("function call stream:\n%s", all)
	}
	if rs := m.Requests(); len(rs) != 2 || !strings.Contains(rs[1].Contents(), `"hi"`) {
		t.Fatalf("recorded %d turn requests", len(rs))
	}
}
