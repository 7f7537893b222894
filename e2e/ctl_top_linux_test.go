package e2e

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/ctl"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ECtlTopTree: ctl top and ctl show sum RSS and PSS over the
// provider's whole tree: a child holding 64 MiB of its own (echo's /hog)
// counts, as a second process, in both.
func TestE2ECtlTopTree(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	s := openCgSession(t, d, "echo")
	hog := pidAfter(t, s.turn(t, "/hog 64"), "hog=")
	dir := t.TempDir()
	var last string
	for deadline := time.Now().Add(60 * time.Second); ; {
		// Each round measures over --interval: the hog touches its pages meanwhile.
		code, out, errOut := runCtl(t, d.Socket, dir, "--json", "top", "--once", "--interval", "100ms")
		var rows []ctl.TopRow
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 {
			t.Fatalf("top: exit %d %q %s", code, out, errOut)
		}
		r := rows[0]
		if r.Procs >= 2 && r.RSS >= 64<<20 && r.PSS >= 64<<20 {
			break
		}
		last = out
		if time.Now().After(deadline) {
			t.Fatalf("top never summed the hog (pid %d, 64 MiB) into the tree's RSS and PSS:\n%s", hog, last)
		}
	}
	code, out, errOut := runCtl(t, d.Socket, dir, "show", s.id)
	m := regexp.MustCompile(`(?m)^rss\s+(\d+\.\d)M \(summed over the processes\)$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("show: exit %d\n%s%s", code, out, errOut)
	}
	if mb, _ := strconv.ParseFloat(m[1], 64); mb < 64 {
		t.Fatalf("show: rss %sM, want the hog's 64 MiB in it:\n%s", m[1], out)
	}
	m = regexp.MustCompile(`(?m)^pss\s+(\d+\.\d)M \(summed over the processes, shared pages divided between their processes\)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("show: no pss line:\n%s", out)
	}
	if mb, _ := strconv.ParseFloat(m[1], 64); mb < 64 {
		t.Fatalf("show: pss %sM, want the hog's 64 MiB in it:\n%s", m[1], out)
	}
}
