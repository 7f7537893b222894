package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider/claude"
)

// stuckCLI speaks just enough stream-json to start, then acknowledges an
// interrupt without ever ending the turn (a CLI that ignores it).
const stuckCLI = `#!/bin/sh
while IFS= read -r l; do
  id=$(printf '%s' "$l" | sed -n 's/.*"request_id":"\([^"]*\)".*/\1/p')
  if [ -n "$id" ]; then
    printf '{"type":"control_response","response":{"subtype":"success","request_id":"%s","response":{}}}\n' "$id"
  fi
done
`

// silentCLI answers every control request but the interrupt, which it
// never answers at all.
const silentCLI = `#!/bin/sh
while IFS= read -r l; do
  case "$l" in *'"interrupt"'*) continue ;; esac
  id=$(printf '%s' "$l" | sed -n 's/.*"request_id":"\([^"]*\)".*/\1/p')
  if [ -n "$id" ]; then
    printf '{"type":"control_response","response":{"subtype":"success","request_id":"%s","response":{}}}\n' "$id"
  fi
done
`

// A Claude CLI that acknowledges the interrupt but does not end the turn
// within the step timeout, or never answers the interrupt at all: the turn
// ends interrupted (user_cancel), cancel answers cancelled:true within the
// step timeout (not the provider request timeout), and the child is
// stopped by the ladder (session.ended evicted).
func TestClaudeInterruptIgnoredStopsChild(t *testing.T) {
	for name, cli := range map[string]string{"acknowledged": stuckCLI, "unanswered": silentCLI} {
		t.Run(name, func(t *testing.T) { testInterruptIgnored(t, cli) })
	}
}

func testInterruptIgnored(t *testing.T, cli string) {
	f := newFixture(t)
	f.h.o.RequestTimeout = stallGuard * 10 // only the step timeout may end the wait
	script := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(script, []byte(cli), 0o755); err != nil {
		t.Fatal(err)
	}
	f.h.o.Providers["claude"] = Provider{Name: "claude", Command: []string{script}, New: claude.New, ResumeArgs: claude.ResumeArgs}
	ctx := context.Background()
	id := f.create("claude")
	f.hold(id, "h", "c1")
	if _, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	if r, err := f.h.Cancel(ctx, id); err != nil || !r.Cancelled {
		t.Fatalf("cancel %+v %v", r, err)
	}
	tc := data(f.waitFor(id, 0, isType(event.TurnCompleted)))
	if tc["status"] != event.StatusInterrupted || tc["reason"] != event.ReasonUserCancel {
		t.Fatalf("turn.completed %v", tc)
	}
	se := data(f.waitFor(id, 0, isType(event.SessionEnded)))
	if se["reason"] != event.ReasonEvicted {
		t.Fatalf("session.ended %v", se)
	}
	f.waitFor(id, 0, isType(event.LeaseReleased))
}
