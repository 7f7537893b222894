package journal

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

// TestGarbageLogNamesRowOrKey: a row that does not decode is logged with
// its seq, a key that is no seq with the key.
func TestGarbageLogNamesRowOrKey(t *testing.T) {
	var logs syncBuf
	j, st := open(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const id = "sess-garbage-log"
	mustAppend(t, j, id, delta("", "a"), delta("", "b"))
	if err := st.DB.Update(func(tx *bolt.Tx) error {
		evb := sessionBucket(tx, id).Bucket(keyEvents)
		if err := evb.Put([]byte{0, 0, 0, 0, 0, 0, 0, 1, 9}, []byte("{}")); err != nil {
			return err
		}
		return evb.Put(store.U64(2), []byte("\x00not json"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := j.Read(id, 0, 10); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, `msg="journal row does not decode; skipped" session_id=sess-garbage-log seq=2`) ||
		!strings.Contains(out, `msg="journal key does not decode; skipped" session_id=sess-garbage-log key=000000000000000109`) {
		t.Fatalf("log:\n%s", out)
	}
}

// TestOpenLogsUnreadableApprovals: meta approvals that do not decode are
// logged, naming the session; the rest of the state loads.
func TestOpenLogsUnreadableApprovals(t *testing.T) {
	dir := t.TempDir()
	const id = "sess-appr"
	st := openStore(t, dir)
	opts := Options{Now: func() time.Time { return fixedNow }}
	j, err := Open(st.DB, opts)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, j, id, delta("", "a"))
	j.Close()
	if err := st.DB.Update(func(tx *bolt.Tx) error {
		return sessionBucket(tx, id).Bucket(keyMeta).Put(keyApprovals, []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	j, err = Open(st.DB, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Close(); st.Close() }()
	if s := j.State(id); s.LastSeq != 1 || !strings.Contains(logs.String(), `msg="journal meta approvals unreadable" session_id=sess-appr`) {
		t.Fatalf("state %+v, log:\n%s", s, logs.String())
	}
}
