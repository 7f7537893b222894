package codextest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/provider/codex"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// keyed is a CODEX_HOME whose model provider sends key as its bearer
// token: one account of the model server.
func keyed(t *testing.T, m *codextest.Model, key string) string {
	return codextest.Home(t, m.URL, "experimental_bearer_token = \""+key+"\"\n")
}

// A thread started in home A, carried to home B with codex.Move, resumes
// in a codex on B with its history (the model's next request carries A's
// turn and B's key); carried back, B's newer copy replaces A's stale one
// (the request on A carries B's turn too, with A's key). A third home
// without the copy answers the resume with codex's "no rollout found"
// (the typed not-found: the adapter replaces the thread).
func TestCodexMoveBetweenHomes(t *testing.T) {
	m := codextest.NewModel(t, codextest.Text("noted"), codextest.Text("apple"), codextest.Text("both"))
	homeA, homeB := keyed(t, m, "key-A"), keyed(t, m, "key-B")
	cwd := t.TempDir()
	ctx := context.Background()

	a, err := startAdapter(t, homeA, cwd, "")
	if err != nil {
		t.Fatal(err)
	}
	thread := a.res.ThreadID
	if tc := a.Turn(providertest.Ctx(t), t, "t1", "remember the word pineapple-42"); tc.Status != event.StatusCompleted {
		t.Fatalf("turn on A: %+v", tc)
	}
	a.Stop()
	move := func(from, to string) {
		t.Helper()
		err := codex.Move(ctx, provider.Move{From: envOf(map[string]string{"CODEX_HOME": from}),
			To: envOf(map[string]string{"CODEX_HOME": to}), ThreadID: thread, Cwd: cwd})
		if err != nil {
			t.Fatal(err)
		}
	}
	move(homeA, homeB)

	b, err := startAdapter(t, homeB, cwd, thread)
	if err != nil {
		t.Fatal(err)
	}
	if !b.res.Resumed || b.res.ThreadID != thread || b.res.Replaced != nil {
		t.Fatalf("resume on B: %+v", b.res)
	}
	if tc := b.Turn(providertest.Ctx(t), t, "t2", "which word, bravo?"); tc.Status != event.StatusCompleted {
		t.Fatalf("turn on B: %+v", tc)
	}
	b.Stop()
	reqs := m.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Input(), "pineapple-42") || reqs[1].Credential != "Bearer key-B" ||
		reqs[0].Credential != "Bearer key-A" {
		t.Fatalf("request on B: %d requests, credentials %q %q\n%s", len(reqs), reqs[0].Credential, reqs[len(reqs)-1].Credential, m.Summary())
	}

	move(homeB, homeA) // A holds its own older copy: replaced
	a2, err := startAdapter(t, homeA, cwd, thread)
	if err != nil {
		t.Fatal(err)
	}
	if !a2.res.Resumed || a2.res.ThreadID != thread {
		t.Fatalf("resume back on A: %+v", a2.res)
	}
	a2.Turn(providertest.Ctx(t), t, "t3", "and now?")
	a2.Stop()
	reqs = m.Requests()
	last := reqs[len(reqs)-1]
	if len(reqs) != 3 || !strings.Contains(last.Input(), "pineapple-42") || !strings.Contains(last.Input(), "which word, bravo?") ||
		last.Credential != "Bearer key-A" {
		t.Fatalf("request back on A: %d requests, credential %q\n%s", len(reqs), last.Credential, m.Summary())
	}

	// A home that never had the thread.
	homeC := keyed(t, m, "key-C")
	if err := codex.Move(ctx, provider.Move{From: envOf(map[string]string{"CODEX_HOME": homeC}),
		To: envOf(map[string]string{"CODEX_HOME": t.TempDir()}), ThreadID: thread}); !errors.Is(err, provider.ErrNoThreadCopy) {
		t.Fatalf("move from a home without the thread: %v", err)
	}
	c, err := startAdapter(t, homeC, cwd, thread)
	if err != nil {
		t.Fatal(err)
	}
	if c.res.Replaced == nil || !strings.Contains(c.res.Replaced.Cause, "no rollout found") || c.res.ThreadID == thread {
		t.Fatalf("resume in a home without the copy: %+v", c.res)
	}
}
