package proc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// ScanEnv finds a helper and the grandchild that inherited its
// environment (setsid: not in its group) by one exact entry, and neither
// another helper's processes nor a prefix of the value.
func TestScanEnv(t *testing.T) {
	a, b := spawnHelper(t, "orphan"), spawnHelper(t, "sleep")
	got, err := ScanEnv(EnvSessionID + "=" + a.tags.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	want := []Identity{a.Identity(), a.grand}
	slices.SortFunc(want, func(x, y Identity) int { return x.PID - y.PID })
	if !slices.Equal(got, want) {
		t.Fatalf("ScanEnv(a) = %v, want the child and its grandchild %v", got, want)
	}
	if got, _ := ScanEnv(EnvSessionID + "=" + b.tags.SessionID); !slices.Equal(got, []Identity{b.Identity()}) {
		t.Fatalf("ScanEnv(b) = %v, want [%v]", got, b.Identity())
	}
	prefix := a.tags.SessionID[:len(a.tags.SessionID)-1]
	if got, _ := ScanEnv(EnvSessionID + "=" + prefix); len(got) != 0 {
		t.Fatalf("ScanEnv(a prefix of the value) = %v, want none", got)
	}
	if v := a.Stop(context.Background(), testLadder); v.Tree != Exited || len(v.Survivors) > 0 {
		t.Fatalf("stop: %+v", v)
	}
	if got, _ := ScanEnv(EnvSessionID + "=" + a.tags.SessionID); len(got) != 0 {
		t.Fatalf("after the stop, ScanEnv(a) = %v", got)
	}
}

// A pair that is not NAME=VALUE is refused, naming what it got.
func TestScanEnvBadPair(t *testing.T) {
	for _, kv := range []string{"", "NAME", "=value", "A=b\x00c"} {
		_, err := ScanEnv(kv)
		if !errors.Is(err, ErrBadEnvPair) || !strings.Contains(err.Error(), "want NAME=VALUE") {
			t.Errorf("ScanEnv(%q): %v", kv, err)
		}
	}
}
