package host

import (
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/store"
)

// firedClock is the real clock telling when a timer's function returned.
type firedClock struct {
	realClock
	fired chan struct{}
}

func (c firedClock) AfterFunc(d time.Duration, f func()) Timer {
	return c.realClock.AfterFunc(d, func() { f(); c.fired <- struct{}{} })
}

// TestReleaseClockArmedAtZero: a release clock armed with no time left (a
// live upgrade re-arms one whose instant has passed) fires at once; its
// function must not read the timer before the arming stored it (-race: a
// data race on the timer variable, seen as exit 66 of an upgraded daemon).
func TestReleaseClockArmedAtZero(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	j, err := journal.Open(st.DB, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	clk := firedClock{fired: make(chan struct{}, 1)}
	h, err := New(Options{Store: st, Journal: j, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	e := newEntry("s_TEST", StateStored) // nothing to evict: the firing finds it stale
	h.mu.Lock()
	h.armMapLocked(e, 0)
	h.mu.Unlock()
	select {
	case <-clk.fired:
	case <-time.After(30 * time.Second):
		t.Fatal("the release clock armed at zero never fired")
	}
}
