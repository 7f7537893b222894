package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/lease"
)

// TestLeaseErrorKinds: lease's own errors become the wire's kinds in one
// place, with the data clients match on.
func TestLeaseErrorKinds(t *testing.T) {
	owned := fmt.Errorf("acquire: %w", &lease.OwnedError{SessionID: "s1", PID: 31})
	for _, tc := range []struct {
		name string
		err  error
		want *api.Error
		data func(map[string]any) bool
	}{
		{"owned", owned, api.ErrSessionOwned, func(d map[string]any) bool { return d["pid"] == 31 }},
		{"unverifiable", lease.ErrUnverifiable, api.ErrSessionOwned, func(d map[string]any) bool { return d["owner"] == "unverifiable" }},
		{"stale fence", fmt.Errorf("commit: %w", lease.ErrStaleFence), api.ErrStaleFence, func(map[string]any) bool { return true }},
		{"damaged", fmt.Errorf("lease s1: %w: eof", lease.ErrBadRecord), api.ErrSessionDamaged, func(d map[string]any) bool {
			return d["damaged"] == "lease" && d["fix"] == "sessiond ctl delete s1"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := leaseError("s1", tc.err)
			var ae *api.Error
			if !errors.Is(err, tc.want) || !errors.As(err, &ae) || !tc.data(ae.Data) {
				t.Fatalf("leaseError(%v) = %#v", tc.err, err)
			}
		})
	}
	if err := leaseError("s1", errors.New("disk I/O error")); errors.As(err, new(*api.Error)) {
		t.Fatalf("a storage fault became a wire kind: %v", err)
	}
}

// TestJournalErrorKinds: a cursor the journal refuses reaches the wire as
// cursor_ahead with data.lastSeq (read and attach alike), a lagged or
// closed feed as api's sentinels.
func TestJournalErrorKinds(t *testing.T) {
	f := newFixture(t, journal.Options{})
	id := f.create("echo")
	ctx := context.Background()
	_, rerr := f.h.Read(ctx, api.ReadParams{SessionID: id, AfterSeq: 99})
	_, _, aerr := f.h.Attach(ctx, "c1", api.AttachParams{SessionID: id, AfterSeq: 99}, false)
	for _, err := range []error{rerr, aerr} {
		var ae *api.Error
		if !errors.Is(err, api.ErrCursorAhead) || !errors.As(err, &ae) || ae.Data["lastSeq"] != uint64(1) {
			t.Fatalf("cursor ahead: %#v", err)
		}
		if msg := err.Error(); strings.Count(msg, "ahead") != 1 {
			t.Fatalf("the message repeats itself: %q", msg)
		}
	}
	compacted := &journal.CursorError{Err: journal.ErrCursorCompacted, SessionID: id, After: 1, OldestSeq: 5}
	var ae *api.Error
	if err := journalError(compacted); !errors.Is(err, api.ErrCursorCompacted) || !errors.As(err, &ae) || ae.Data["oldestSeq"] != uint64(5) {
		t.Fatalf("compacted: %#v", err)
	}
	if !errors.Is(journalError(journal.ErrLagged), api.ErrLagged) || !errors.Is(journalError(journal.ErrSubscriptionClosed), api.ErrSubscriptionClosed) {
		t.Fatal("feed errors not mapped")
	}
}
