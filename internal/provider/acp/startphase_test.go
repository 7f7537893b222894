package acp

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/provider"
)

// An agent whose stdout ends after it spawned and before the session is
// live (during initialize, authenticate, session/new or session/load),
// while the process runs on: Start fails at once (long before any request
// timeout) naming the phase and that stdout ended, wrapping ErrExited, so
// the host tears the child down as for any failed start.
func TestStdoutEndsBeforeLive(t *testing.T) {
	for _, phase := range []string{"initialize", "authenticate", "session/new", "session/load"} {
		t.Run(strings.ReplaceAll(phase, "/", "_"), func(t *testing.T) {
			g := startAgent(t, "closeout:"+phase, func(o *provider.Options, p *Profile) {
				o.RequestTimeout = time.Hour // a Start that waits for it hangs the test
				p.AuthMethod = "key"
				if phase == "session/load" {
					o.ThreadID = "sess-old"
				}
			})
			type result struct{ err error }
			done := make(chan result, 1)
			go func() { _, err := g.a.Start(t.Context()); done <- result{err} }()
			var err error
			select {
			case r := <-done:
				err = r.err
			case <-time.After(20 * time.Second):
				t.Fatalf("Start still waits after the agent's stdout ended during %s", phase)
			}
			if err == nil || !errors.Is(err, provider.ErrExited) || !strings.Contains(err.Error(), phase) ||
				!strings.Contains(err.Error(), "stdout ended") {
				t.Fatalf("start: %v", err)
			}
			if err := g.cmd.Process.Signal(syscall.Signal(0)); err != nil {
				t.Fatalf("the agent is not running: %v", err)
			}
			if g.a.ThreadID() != "" && phase != "session/load" {
				t.Fatalf("a session %q though Start failed", g.a.ThreadID())
			}
		})
	}
}
