package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/store"
)

// damage overwrites the stored row key of bucket with bytes that do not
// decode, as a damaged disk would leave it.
func (f *fixture) damage(bucket []byte, key, junk string) {
	f.t.Helper()
	if err := f.st.DB.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put([]byte(key), []byte(junk))
	}); err != nil {
		f.t.Fatal(err)
	}
}

// A session whose record or lease no longer decodes answers
// session_damaged (naming the damage and doctor's fix) on every method
// that names it, never internal_error, and delete — the fix ctl doctor
// prints — removes it.
func TestDamagedSessionAnswersDamagedAndDeletes(t *testing.T) {
	for _, tc := range []struct{ name, what string }{{"record", "record"}, {"lease", "lease"}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			id := f.create("echo")
			other := f.create("echo")
			if tc.what == "record" {
				f.damage(store.BucketSessions, id, `{"id":"`+id)
			} else {
				f.damage(store.BucketLeases, id, `{"fence":"x`)
			}
			ctx := context.Background()
			_, err := f.h.Hold(ctx, "c1", api.HoldParams{SessionID: id, HolderID: "h"})
			wantDamaged(t, "hold", err, id, tc.what)
			if tc.what == "record" {
				_, err = f.h.Get(ctx, id)
				wantDamaged(t, "get", err, id, tc.what)
			}
			if _, err := f.h.Hold(ctx, "c1", api.HoldParams{SessionID: other, HolderID: "h"}); err != nil {
				t.Fatalf("an undamaged session cannot be held beside a damaged one: %v", err)
			}
			if err := f.h.Delete(ctx, id); err != nil {
				t.Fatalf("delete of a damaged session (ctl doctor's fix) failed: %v", err)
			}
			if _, err := f.h.Get(ctx, id); !errors.Is(err, api.ErrSessionNotFound) {
				t.Fatalf("get after delete: %v, want session_not_found", err)
			}
		})
	}
}

func wantDamaged(t *testing.T, op string, err error, id, what string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Kind != api.KindSessionDamaged {
		t.Fatalf("%s of a session with a damaged %s: %v (kind %v), want session_damaged", op, what, err, api.KindOf(err))
	}
	if ae.Data["damaged"] != what || ae.Data["fix"] != "sessiond ctl delete "+id || !strings.Contains(ae.Msg, "sessiond ctl delete "+id) {
		t.Fatalf("%s: session_damaged does not name the damage and the fix: %q %v", op, ae.Msg, ae.Data)
	}
}

// One lease row that no longer decodes does not stop the daemon from
// starting (every other session stays usable); the damaged session's
// tagged leftover is reaped all the same.
func TestStartupSurvivesDamagedLease(t *testing.T) {
	f := newFixture(t)
	id := f.create("echo")
	c := f.spawnLeftover(id, 1)
	f.leaseTo(id, c)
	f.damage(store.BucketLeases, id, `{"fence":"x`)
	if err := f.h.Startup(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatalf("startup refused over one damaged lease row: %v", err)
	}
	select {
	case <-c.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("the tagged leftover of the damaged session is still running after startup (pid %d)", c.Identity().PID)
	}
	_, err := f.h.Hold(context.Background(), "c1", api.HoldParams{SessionID: id, HolderID: "h"})
	wantDamaged(t, "hold", err, id, "lease")
}
