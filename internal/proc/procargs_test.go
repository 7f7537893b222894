package proc

import (
	"encoding/binary"
	"testing"
)

// TestProcArgsEnv: the environment of a KERN_PROCARGS2 buffer (macOS) is
// found after the executable path, its padding and argc arguments, and
// ends at the first empty string; our tags parse from it as from Linux's
// environ. Truncated buffers are errors, never a wrong environment.
func TestProcArgsEnv(t *testing.T) {
	argc := make([]byte, 4)
	binary.LittleEndian.PutUint32(argc, 2)
	b := append(argc, "/usr/bin/codex\x00\x00\x00\x00codex\x00app-server\x00HOME=/Users/u\x00SESSIOND_SESSION_ID=s_1\x00SESSIOND_STATE_ID=st\x00SESSIOND_FENCE=7\x00\x00ptr_munge=x\x00"...)
	env, err := procArgsEnv(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "HOME=/Users/u\x00SESSIOND_SESSION_ID=s_1\x00SESSIOND_STATE_ID=st\x00SESSIOND_FENCE=7\x00"; string(env) != want {
		t.Fatalf("env = %q, want %q", env, want)
	}
	tags, ok := envTags(env)
	if !ok || tags.SessionID != "s_1" || tags.StateID != "st" || tags.Fence != 7 {
		t.Fatalf("tags = %+v %v", tags, ok)
	}
	binary.LittleEndian.PutUint32(argc, 5) // more arguments than the buffer holds
	for _, bad := range [][]byte{nil, {1, 0}, append(append([]byte{}, argc...), "/bin/x\x00a\x00"...), append([]byte{0, 0, 0, 0}, "/no/terminator"...)} {
		if _, err := procArgsEnv(bad, nil); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}
