package proc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// Marked scoped by a session's tags finds a helper and the grandchild
// that inherited its environment (setsid: not in its group) by one exact
// entry, and neither another helper's processes nor a prefix of the value.
func TestMarkedScopedBySession(t *testing.T) {
	a, b := spawnHelper(t, "orphan"), spawnHelper(t, "sleep")
	got, err := Marked(a.tags, EnvSessionID, a.tags.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	want := []Identity{a.Identity(), a.grand}
	slices.SortFunc(want, func(x, y Identity) int { return x.PID - y.PID })
	if !slices.Equal(got, want) {
		t.Fatalf("Marked(a) = %v, want the child and its grandchild %v", got, want)
	}
	if got, _ := Marked(b.tags, EnvSessionID, b.tags.SessionID); !slices.Equal(got, []Identity{b.Identity()}) {
		t.Fatalf("Marked(b) = %v, want [%v]", got, b.Identity())
	}
	if got, _ := Marked(b.tags, EnvSessionID, a.tags.SessionID); len(got) != 0 {
		t.Fatalf("Marked(b's scope, a's mark) = %v, want none", got)
	}
	prefix := a.tags.SessionID[:len(a.tags.SessionID)-1]
	if got, _ := Marked(a.tags, EnvSessionID, prefix); len(got) != 0 {
		t.Fatalf("Marked(a prefix of the value) = %v, want none", got)
	}
	if v := a.Stop(context.Background(), testLadder); v.Tree != Exited || len(v.Survivors) > 0 {
		t.Fatalf("stop: %+v", v)
	}
	if got, _ := Marked(a.tags, EnvSessionID, a.tags.SessionID); len(got) != 0 {
		t.Fatalf("after the stop, Marked(a) = %v", got)
	}
}

// A scope without an owner or a state id, and a mark that is not
// NAME=VALUE, are refused, naming what was wrong.
func TestMarkedBadInput(t *testing.T) {
	ok := Tags{RuntimeID: "r_X", StateID: "s"}
	for _, c := range []struct {
		scope      Tags
		key, value string
		want       string
	}{
		{Tags{StateID: "s"}, "K", "v", "scope needs"},
		{Tags{RuntimeID: "r_X"}, "K", "v", "scope needs"},
		{ok, "", "v", "want a NAME"},
		{ok, "K=", "v", "want a NAME"},
		{ok, "K", "", "want a NAME"},
		{ok, "K", "a\x00b", "want a NAME"},
	} {
		_, err := Marked(c.scope, c.key, c.value)
		if !errors.Is(err, ErrBadMark) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Marked(%+v, %q, %q): %v", c.scope, c.key, c.value, err)
		}
	}
}
