package e2e

import (
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/ctl"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/store"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EDamagedValuesVisible: bbolt checksums no value, so damage inside
// a record or a journal row passes the store's checks. doctor reads every
// record and row and reports them (exit 1), and a read of the damaged
// journal gets a journal.corrupt event in the row's place: seq stays
// gapless and the damage is seen. A damaged lease row is a doctor
// problem too, and does not keep the daemon from starting. Methods naming
// a damaged session answer session_damaged with doctor's fix (delete),
// and that fix works.
func TestE2EDamagedValuesVisible(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	var ids [3]string
	for i := range ids {
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
			t.Fatal(err)
		}
		ids[i] = s.SessionID
	}
	if code, rep, out := doctorJSON(t, d.Socket); code != 0 || len(problemsOf(rep, ctl.CheckDamagedRows)) != 0 {
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
		if err := tx.Bucket(store.BucketLeases).Put([]byte(ids[2]), []byte(`{"fence":"`)); err != nil {
			return err
		}
		if err := tx.Bucket(store.BucketRuntimes).Put([]byte("r_DAMAGED"), []byte(`{"runtimeId":"r_DAM`)); err != nil {
			return err
		}
		return tx.Bucket(store.BucketJournal).Bucket([]byte(ids[1])).Bucket([]byte("events")).Put(store.U64(1), []byte("{\"seq\":1,\x07"))
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	code, rep, out := doctorJSON(t, d.Socket, "--state-dir", d.StateDir)
	ps := problemsOf(rep, ctl.CheckDamagedRows)
	if code != 1 || len(ps) != 2 || !strings.Contains(ps[0].What, ids[0]) || !strings.Contains(ps[1].What, ids[1]) {
		t.Fatalf("doctor on the damaged store: exit %d\n%s", code, out)
	}
	if ls := problemsOf(rep, "leases"); len(ls) != 1 || !strings.Contains(ls[0].What, ids[2]) || ls[0].Fix != "sessiond ctl --socket "+d.Socket+" delete "+ids[2]+"   # or restore sessiond.db from a backup" {
		t.Fatalf("doctor does not report the damaged lease with its fix:\n%s", out)
	}
	if rs := problemsOf(rep, ctl.CheckRuntimeRecords); len(rs) != 1 || !strings.Contains(rs[0].What, "runtime r_DAMAGED: its record does not decode") ||
		!strings.Contains(rs[0].Fix, "startup reaps the runtime by its tag and deletes the record") {
		t.Fatalf("doctor does not report the damaged runtime record with its fix:\n%s", out)
	}
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir})
	// Startup ran before the daemon listened: its log has the line, once.
	if n := strings.Count(d2.Log.String(), `"msg":"runtime record unreadable: its runtime is reaped by the tag scan only","runtime_id":"r_DAMAGED"`); n != 1 {
		t.Fatalf("the damaged runtime record logged %d times, want once:\n%s", n, d2.Log.String())
	}
	c2 := d2.Client(t)
	evs := readJournal(t, c2, ids[1])
	if len(evs) == 0 || evs[0].Seq != 1 || evs[0].Type != event.JournalCorrupt {
		t.Fatalf("the damaged row read as %+v, want journal.corrupt at seq 1", evs)
	}
	for _, id := range []string{ids[0], ids[2]} {
		err := c2.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "h"}, nil)
		var re *rpc.Error
		if !errors.As(err, &re) || re.Code != -32028 || re.Reason != "session_damaged" || re.Data["fix"] != "sessiond ctl delete "+id {
			t.Fatalf("hold of damaged session %s: %v %+v, want -32028 session_damaged naming the fix", id, err, re)
		}
		if err := c2.Call(ctx10(t), "agentSession.delete", map[string]string{"sessionId": id}, nil); err != nil {
			t.Fatalf("delete of damaged session %s (doctor's fix): %v", id, err)
		}
	}
	// The tag scan ran: the damaged runtime record was deleted.
	d2.Stop()
	if recs := runtimeRecords(t, d.StateDir); len(recs) != 0 {
		t.Fatalf("runtime records after the restart: %+v", recs)
	}
	st, err = store.OpenReadOnly(d.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.GetRuntime("r_DAMAGED"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the damaged runtime record after a restart whose tag scan ran: %v, want deleted", err)
	}
}
