package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/acptest"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// TestREADMEMatchesCode: the README names every built-in provider where it
// lists them, the CLIs `make test` installs (the pinned packages), the
// release delay (idle_timeout's default) and a row for each
// turn.completed status and reason the daemon and its adapters write.
func TestREADMEMatchesCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	para := func(start string) string {
		i := strings.Index(readme, start)
		if i < 0 {
			t.Fatalf("README has no %q", start)
			return ""
		}
		p := readme[i:]
		if j := strings.Index(p, "\n\n"); j >= 0 {
			p = p[:j]
		}
		return p
	}
	// echo always; codex and claude when on PATH (config.Default).
	for _, where := range []string{"sessiond is a per-user daemon", "- Providers:"} {
		names := []string{"echo", "codex", "claude"}
		for _, b := range config.ACPBuiltins {
			names = append(names, b.Name)
		}
		for _, name := range names {
			if p := para(where); !strings.Contains(p, "`"+name+"`") {
				t.Errorf("README %q does not name `%s`:\n%s", where, name, p)
			}
		}
	}
	for _, pkg := range []string{codextest.Package, claudetest.Package, acptest.CodexACPPackage, acptest.SDKPackage} {
		if !strings.Contains(para("`make test` first installs"), "`"+pkg+"`") {
			t.Errorf("README does not say `make test` installs %s", pkg)
		}
	}
	if want := fmt.Sprintf("`idle_timeout` (default %d s)", config.DefaultIdleTimeout/time.Second); !strings.Contains(para("A released session"), want) {
		t.Errorf("README's release delay does not say %q", want)
	}
	rows := [][2]string{
		{event.StatusCompleted, ""},
		{event.StatusInterrupted, event.ReasonUserCancel},
		{event.StatusInterrupted, ""},
		{event.StatusInterrupted, event.ReasonApprovalDenied},
		{event.StatusInterrupted, event.ReasonClosed},
		{event.StatusInterrupted, event.ReasonEvicted},
		{event.StatusInterrupted, event.ReasonShutdown},
		{event.StatusInterrupted, event.ReasonProviderExited},
		{event.StatusInterrupted, event.ReasonDaemonRestart},
		{event.StatusFailed, event.ReasonProviderError},
		{event.StatusFailed, event.ReasonJournalLoss},
	}
	table := para("| status | reason | when |")
	for _, r := range rows {
		reason := "(none)"
		if r[1] != "" {
			reason = "`" + r[1] + "`"
		}
		if row := fmt.Sprintf("| `%s` | %s |", r[0], reason); !strings.Contains(table, row) {
			t.Errorf("README's turn.completed table has no row %q", row)
		}
	}
	if n := strings.Count(table, "\n| `"); n != len(rows) {
		t.Errorf("README's turn.completed table has %d rows, the code writes %d", n, len(rows))
	}
}
