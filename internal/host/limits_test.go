package host

import (
	"context"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/proc"
)

// A limit the child's cgroup reports (the proc watcher calls the child's
// OnLimit) is journaled as provider.notice {code}, and the provider.exited
// of a child that then dies on its own names it; a child stopped by the
// daemon carries no limit.
func TestLimitNoticeAndExitTail(t *testing.T) {
	f := newFixture(t)
	id := f.create("echo")
	f.hold(id, "h", "c1")
	e := f.h.lookup(id)
	e.mu.Lock()
	onLimit := f.h.onLimit(e, e.sink)
	e.mu.Unlock()
	onLimit(proc.LimitPids)
	n := f.waitFor(id, 0, isType(event.ProviderNotice))
	if data(n)["code"] != proc.LimitPids || data(n)["level"] != "warning" {
		t.Fatalf("provider.notice %s", n.Data)
	}
	if _, err := f.h.Send(context.Background(), api.SendParams{SessionID: id, Text: "/crash"}); err != nil {
		t.Fatal(err)
	}
	px := f.waitFor(id, 0, isType(event.ProviderExited))
	if data(px)["limit"] != proc.LimitPids || data(px)["expected"] != false {
		t.Fatalf("provider.exited %s, want limit %s", px.Data, proc.LimitPids)
	}
	f.waitFor(id, 0, isType(event.LeaseReleased))

	// held again, hit, then closed by the daemon: no limit on the exit
	f.hold(id, "h", "c1")
	e = f.h.lookup(id)
	e.mu.Lock()
	onLimit = f.h.onLimit(e, e.sink)
	e.mu.Unlock()
	onLimit(proc.LimitMemory)
	after := px.Seq
	if _, err := f.h.Close(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	px2 := f.waitFor(id, after, isType(event.ProviderExited))
	if _, ok := data(px2)["limit"]; ok {
		t.Fatalf("provider.exited of a closed child names a limit: %s", px2.Data)
	}
}
