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

// A live session's record damaged on disk after its holds checked it
// answers session_damaged to the next hold and release (the existence
// check remembers only bytes it decoded, never an answer), and an unknown
// session is session_not_found to both.
func TestLiveSessionRecordDamagedAfterHold(t *testing.T) {
	f := newFixture(t)
	id := f.create("echo")
	first := f.hold(id, "h1", "c1")
	ctx := context.Background()
	if _, err := f.h.Release(ctx, "c1", api.ReleaseParams{SessionID: id, HolderID: "nobody"}); err != nil {
		t.Fatalf("release of an unknown holder: %v", err)
	}
	f.damage(store.BucketSessions, id, `{"id":"`+id)
	_, err := f.h.Hold(ctx, "c2", api.HoldParams{SessionID: id, HolderID: "h2"})
	wantDamaged(t, "hold", err, id, "record")
	_, err = f.h.Release(ctx, "c1", api.ReleaseParams{SessionID: id, HolderID: "h1", HoldToken: first.HoldToken})
	wantDamaged(t, "release", err, id, "record")
	_, err = f.h.Hold(ctx, "c1", api.HoldParams{SessionID: "s_doesnotexist", HolderID: "h"})
	wantKind(t, err, api.KindSessionNotFound)
	_, err = f.h.Release(ctx, "c1", api.ReleaseParams{SessionID: "s_doesnotexist", HolderID: "h"})
	wantKind(t, err, api.KindSessionNotFound)
	// Its child must not outlive the damage: close stops it, delete
	// (doctor's fix) removes the session.
	res, err := f.h.Close(ctx, id)
	if err != nil {
		t.Fatalf("close of the damaged live session: %v", err)
	}
	for _, st := range res.Steps {
		if !st.OK {
			t.Fatalf("close of the damaged live session: step %s failed: %+v", st.Name, res.Steps)
		}
	}
	if alive(first.PID) {
		t.Fatalf("child %d outlived the close of its damaged session", first.PID)
	}
	if err := f.h.Delete(ctx, id); err != nil {
		t.Fatalf("delete of the damaged session after close: %v", err)
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
