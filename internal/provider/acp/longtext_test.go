package acp

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// What the agent chooses the length of is cut wherever the daemon shows or
// journals it: a stopReason (journaled as a name, at most 128 bytes), an
// error answer's message (at most 1 KiB, its size named) in a failed turn
// and a failed start, the authMethods a failed authenticate names (the
// first 16, then how many more).
func TestAgentChosenLengths(t *testing.T) {
	g := startAgent(t, "", nil)
	g.lax = true // an unknown stopReason
	g.start(t)
	evs := g.turn(t, "t_1", "longstop 5000000")
	tc := data[event.TurnCompletedData](t, evs[len(evs)-1])
	if len(tc.StopReason) > maxNameBytes || tc.Status != event.StatusFailed || len(tc.Error) > 1000 {
		t.Fatalf("a 5 MB stopReason: status %s, stopReason of %d bytes, error of %d bytes", tc.Status, len(tc.StopReason), len(tc.Error))
	}
	evs = g.turn(t, "t_2", "longfail 5000000")
	tc = data[event.TurnCompletedData](t, evs[len(evs)-1])
	if tc.Status != event.StatusFailed || len(tc.Error) > 1000 || !strings.Contains(tc.Error, "eee") {
		t.Fatalf("a 5 MB error message: status %s, error of %d bytes: %.200s", tc.Status, len(tc.Error), tc.Error)
	}
	if l := g.log(); len(l) > 64<<10 {
		t.Fatalf("the log holds %d bytes", len(l))
	}

	g = startAgent(t, "initerr", nil)
	_, err := g.a.Start(t.Context())
	if err == nil || len(err.Error()) > 1200 || !strings.Contains(err.Error(), "1048576 bytes") {
		t.Fatalf("initialize answered with a 1 MiB message: %d bytes: %.300v", len(err.Error()), err)
	}

	g = startAgent(t, "manyauth", func(_ *provider.Options, p *Profile) { p.AuthMethod = "nope" })
	_, err = g.a.Start(t.Context())
	if err == nil || len(err.Error()) > 4096 || !strings.Contains(err.Error(), "and 1984 more") {
		t.Fatalf("2000 authMethods of 1000 bytes: %d bytes: %.300v", len(err.Error()), err)
	}
}
