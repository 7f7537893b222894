package host

import (
	"strings"
	"testing"
)

// TestPortableHistoryBound: the history keeps the newest turns that fit
// the bound, oldest dropped first, and is empty when none fits.
func TestPortableHistoryBound(t *testing.T) {
	turns := []portableTurn{{"u1", "a1"}, {"u2", "a2"}, {"u3", "a3"}}
	one := len("User: u1\nAssistant: a1\n")
	frame := len(portableHead) + len(portableTail)
	for _, tc := range []struct {
		limit      int
		want, gone []string
	}{
		{frame + 3*one, []string{"u1", "u2", "u3"}, nil},
		{frame + 3*one - 1, []string{"u2", "u3"}, []string{"u1"}},
		{frame + one, []string{"u3"}, []string{"u1", "u2"}},
	} {
		got := formatHistory(turns, tc.limit)
		if len(got) > tc.limit {
			t.Errorf("limit %d: %d bytes", tc.limit, len(got))
		}
		for _, w := range tc.want {
			if !strings.Contains(got, "User: "+w+"\n") {
				t.Errorf("limit %d: %q lacks %s", tc.limit, got, w)
			}
		}
		for _, g := range tc.gone {
			if strings.Contains(got, "User: "+g+"\n") {
				t.Errorf("limit %d: %q keeps %s", tc.limit, got, g)
			}
		}
	}
	if got := formatHistory(turns, frame+one-1); got != "" {
		t.Errorf("nothing fits: %q", got)
	}
	if got := formatHistory(nil, 1<<20); got != "" {
		t.Errorf("no turns: %q", got)
	}
}
