package proc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
)

// A runtime's tags: the spawned tree carries SESSIOND_RUNTIME_ID and
// SESSIOND_STATE_ID and no session's id or fence (also when the daemon's
// own environment had some); ScanTagged reports it by its runtime id; the
// ladder's tree finds it by those tags.
func TestRuntimeTags(t *testing.T) {
	tags := Tags{RuntimeID: fmt.Sprintf("r_TAGS%d", os.Getpid()), StateID: testStateID}
	c, err := Spawn(Spec{Path: "sleep", Args: []string{"600"}, Tags: tags,
		Env: append(os.Environ(), EnvSessionID+"=s_INHERITED", EnvFence+"=7", EnvRuntimeID+"=r_INHERITED")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if v := c.Stop(context.Background(), testLadder); v.Root != Exited {
			t.Errorf("stop: %+v", v)
		}
	}()
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", c.Identity().PID))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{EnvRuntimeID + "=" + tags.RuntimeID, EnvStateID + "=" + testStateID} {
		if !hasEntry(env, []byte(want)) {
			t.Errorf("the runtime's environment lacks %s", want)
		}
	}
	for _, not := range []string{EnvSessionID + "=", EnvFence + "=", "r_INHERITED"} {
		if bytes.Contains(env, []byte(not)) {
			t.Errorf("the runtime's environment carries %s", not)
		}
	}
	found, err := ScanTagged(testStateID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range found {
		if f.PID == c.Identity().PID {
			n++
			if f.RuntimeID != tags.RuntimeID || f.SessionID != "" || f.Tags(testStateID) != tags {
				t.Errorf("ScanTagged: %+v", f)
			}
		}
	}
	if n != 1 {
		t.Fatalf("ScanTagged found the runtime %d times", n)
	}
	r, err := newStatReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	tree, err := r.tree(treeQuery{tags: tags})
	if err != nil || len(tree) != 1 || tree[c.Identity().PID] != c.Identity() {
		t.Fatalf("tree by the runtime's tags: %v, %v", tree, err)
	}
	if other, _ := r.tree(treeQuery{tags: Tags{SessionID: tags.RuntimeID, StateID: testStateID}}); len(other) != 0 {
		t.Fatalf("a session's tags with the runtime's id found %v", other)
	}
}
