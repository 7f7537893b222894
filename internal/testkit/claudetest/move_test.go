package claudetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/provider/claude"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/clitest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// cliProc is the real CLI under one account's environment driven by the
// claude adapter directly (no daemon).
type cliProc struct {
	*clitest.Proc
	err error // Start's
}

// startCLI runs the CLI with env in cwd: resuming threadID, or a fresh
// conversation under fresh.
func startCLI(t *testing.T, env map[string]string, cwd, threadID, fresh string) *cliProc {
	t.Helper()
	args := append([]string{}, claudetest.Args...)
	if threadID != "" {
		args = append(args, claude.ResumeArgs(threadID)...)
	} else {
		_, extra, err := claude.FreshThread(fresh)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, extra...)
	}
	cmd := exec.Command(claudetest.Binary(t), args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = cwd
	o := provider.Options{Cwd: cwd, ThreadID: threadID}
	if threadID == "" {
		o.FreshThreadID = fresh
	}
	p, _, err := clitest.StartAdapter(providertest.Ctx(t), t, cmd, claude.New, o)
	return &cliProc{Proc: p, err: err}
}

// A conversation begun under config dir A (key A), carried to B with
// claude.Move, is `--resume`d by a CLI on B with its history (the model's
// next request carries A's turn and B's key); carried back, B's newer
// transcript replaces A's stale one. A config dir without the transcript
// answers the resume with "No conversation found": ErrThreadNotFound.
func TestClaudeMoveBetweenConfigDirs(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Text("noted"), claudetest.Text("apple"), claudetest.Text("both"))
	envA, envB := claudetest.NewEnv(t, m.URL), claudetest.NewEnv(t, m.URL)
	envA["ANTHROPIC_API_KEY"], envB["ANTHROPIC_API_KEY"] = "key-A", "key-B"
	cwd := t.TempDir()
	id, _, err := claude.FreshThread("")
	if err != nil {
		t.Fatal(err)
	}
	a := startCLI(t, envA, cwd, "", id)
	if a.err != nil {
		t.Fatal(a.err)
	}
	if tc := a.Turn(providertest.Ctx(t), t, "t1", "remember the word pineapple-42"); tc.Status != event.StatusCompleted {
		t.Fatalf("turn on A: %+v", tc)
	}
	a.Stop()
	move := func(from, to map[string]string) {
		t.Helper()
		err := claude.Move(context.Background(), provider.Move{From: func(k string) string { return from[k] },
			To: func(k string) string { return to[k] }, ThreadID: id, Cwd: cwd})
		if err != nil {
			t.Fatal(err)
		}
	}
	move(envA, envB)
	b := startCLI(t, envB, cwd, id, "")
	if b.err != nil {
		t.Fatal(b.err)
	}
	b.Turn(providertest.Ctx(t), t, "t2", "which word, bravo?")
	b.Stop()
	reqs := m.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Messages(), "pineapple-42") || reqs[1].Credential != "key-B" || reqs[0].Credential != "key-A" {
		t.Fatalf("request on B: %d requests, credentials %q, messages %s", len(reqs), reqs[len(reqs)-1].Credential, reqs[len(reqs)-1].Messages())
	}

	move(envB, envA)
	a2 := startCLI(t, envA, cwd, id, "")
	if a2.err != nil {
		t.Fatal(a2.err)
	}
	a2.Turn(providertest.Ctx(t), t, "t3", "and now?")
	a2.Stop()
	reqs = m.Requests()
	last := reqs[len(reqs)-1]
	if len(reqs) != 3 || !strings.Contains(last.Messages(), "pineapple-42") || !strings.Contains(last.Messages(), "which word, bravo?") || last.Credential != "key-A" {
		t.Fatalf("request back on A: %d requests, credential %q, messages %s", len(reqs), last.Credential, last.Messages())
	}

	envC := claudetest.NewEnv(t, m.URL)
	c := startCLI(t, envC, cwd, id, "")
	var nf *provider.NotFoundError
	if !errors.Is(c.err, provider.ErrThreadNotFound) || !errors.As(c.err, &nf) || !strings.Contains(nf.Cause, "No conversation found") {
		t.Fatalf("resume without the transcript: %v", c.err)
	}
}
