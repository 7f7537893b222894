package main

import (
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/daemontest"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
)

// TestE2EDamagedValuesVisible: bbolt checksums no value, so damage inside
// a record or a journal row passes the store's checks. doctor reads every
// record and row and reports them (exit 1), and a read of the damaged
// journal gets a journal.corrupt event in the row's place: seq stays
// gapless and the damage is seen.
func TestE2EDamagedValuesVisible(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	var ids [2]string
	for i := range ids {
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
			t.Fatal(err)
		}
		ids[i] = s.SessionID
	}
	if code, rep, out := doctorJSON(t, d.Socket); code != 0 || len(problemsOf(rep, checkDamagedRows)) != 0 {
		t.Fatalf("doctor before any damage: exit %d\n%s", code, out)
	}
	d.Stop()
	st, err := store.Open(d.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DB.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(store.BucketSessions).Put([]byte(ids[0]), []byte(`{"id":"s_`+"\x00")); err != nil {
			return err
		}
		return tx.Bucket(store.BucketJournal).Bucket([]byte(ids[1])).Bucket([]byte("events")).Put(store.U64(1), []byte("{\"seq\":1,\x07"))
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	code, rep, out := doctorJSON(t, d.Socket, "--state-dir", d.StateDir)
	ps := problemsOf(rep, checkDamagedRows)
	if code != 1 || len(ps) != 2 || !strings.Contains(ps[0].What, ids[0]) || !strings.Contains(ps[1].What, ids[1]) {
		t.Fatalf("doctor on the damaged store: exit %d\n%s", code, out)
	}
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir})
	evs := readJournal(t, d2.Client(t), ids[1])
	if len(evs) == 0 || evs[0].Seq != 1 || evs[0].Type != event.JournalCorrupt {
		t.Fatalf("the damaged row read as %+v, want journal.corrupt at seq 1", evs)
	}
}
