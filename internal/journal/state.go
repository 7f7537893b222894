package journal

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

var (
	keyEvents      = []byte("events")
	keyMeta        = []byte("meta")
	keyDedup       = []byte("dedup")
	keyLastSeq     = []byte("last_seq")
	keyOldestSeq   = []byte("oldest_seq")
	keyOpenTurn    = []byte("open_turn")
	keyOpenTurnSeq = []byte("open_turn_seq")
	keyApprovals   = []byte("approvals")
	keyLosses      = []byte("losses")
)

// approval is a pending approval.requested.
type approval struct {
	RequestID string `json:"requestId"`
	TurnID    string `json:"turnId,omitempty"`
}

// derived is what the journal knows about a session without scanning it.
// Only the writer goroutine changes it (on a copy, installed after commit).
type derived struct {
	LastSeq, OldestSeq uint64
	OpenTurn           string
	OpenTurnSeq        uint64
	Approvals          []approval
	Lost               uint64 // events counted by journal.loss rows

	// lostTurn is the last turn a loss failed: later drafts of it are not
	// journaled (in memory only; its provider child does not outlive us).
	lostTurn string
}

func (d *derived) clone() *derived {
	c := *d
	c.Approvals = slices.Clone(d.Approvals)
	return &c
}

func (d *derived) state() State {
	st := State{LastSeq: d.LastSeq, OldestSeq: d.OldestSeq, OpenTurn: d.OpenTurn, OpenTurnSeq: d.OpenTurnSeq, Lost: d.Lost}
	for _, a := range d.Approvals {
		st.PendingApprovals = append(st.PendingApprovals, a.RequestID)
	}
	return st
}

// apply updates the derived state for a committed event and reports the
// dedup entry (clientMessageId -> turnId) it carries, if any.
func (d *derived) apply(ev *event.Event) (cmid, turn string) {
	switch ev.Type {
	case event.TurnStarted:
		var data event.TurnStartedData
		_ = json.Unmarshal(ev.Data, &data)
		turn = ev.TurnID
		if turn == "" {
			turn = data.TurnID
		}
		d.OpenTurn, d.OpenTurnSeq = turn, ev.Seq
		return data.ClientMessageID, turn
	case event.TurnCompleted:
		if ev.TurnID != "" && ev.TurnID == d.OpenTurn {
			d.OpenTurn, d.OpenTurnSeq = "", 0
		}
		if ev.TurnID != "" {
			// A finished turn's approvals can no longer be answered.
			d.Approvals = slices.DeleteFunc(d.Approvals, func(a approval) bool { return a.TurnID == ev.TurnID })
		}
	case event.ApprovalRequested:
		var data event.ApprovalRequestedData
		if json.Unmarshal(ev.Data, &data) == nil && data.RequestID != "" &&
			!slices.ContainsFunc(d.Approvals, func(a approval) bool { return a.RequestID == data.RequestID }) {
			d.Approvals = append(d.Approvals, approval{RequestID: data.RequestID, TurnID: ev.TurnID})
		}
	case event.ApprovalResolved:
		var data event.ApprovalResolvedData
		if json.Unmarshal(ev.Data, &data) == nil {
			d.Approvals = slices.DeleteFunc(d.Approvals, func(a approval) bool { return a.RequestID == data.RequestID })
		}
	case event.JournalLoss:
		var data event.JournalLossData
		if json.Unmarshal(ev.Data, &data) == nil && data.Count > 0 {
			d.Lost += uint64(data.Count)
		}
	}
	return "", ""
}

// lossDrafts are the rows of a loss note: journal.loss, then the open
// turn (if any) completed failed; later drafts of that turn are dropped.
func (d *derived) lossDrafts(l *lossNote) []event.Draft {
	turn := d.OpenTurn
	ds := []event.Draft{event.New(event.JournalLoss, turn, event.JournalLossData{Count: l.count, Cause: l.cause})}
	if turn != "" {
		ds = append(ds, event.New(event.TurnCompleted, turn, event.TurnCompletedData{Status: event.StatusFailed,
			Reason: event.ReasonJournalLoss, Error: "events of this turn could not be stored: " + l.cause}))
		d.lostTurn = turn
	}
	return ds
}

// save writes the derived state into the session's meta bucket.
func (d *derived) save(meta *bolt.Bucket) error {
	apps, err := json.Marshal(d.Approvals)
	if err != nil {
		return err
	}
	for _, kv := range [][2][]byte{
		{keyLastSeq, store.U64(d.LastSeq)},
		{keyOldestSeq, store.U64(d.OldestSeq)},
		{keyOpenTurn, []byte(d.OpenTurn)},
		{keyOpenTurnSeq, store.U64(d.OpenTurnSeq)},
		{keyApprovals, apps},
		{keyLosses, store.U64(d.Lost)},
	} {
		if err := meta.Put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// loadDerived reads a session's meta; when it is missing or behind the
// events bucket (a file written by something else), the state is rebuilt
// from the events.
func (j *Journal) loadDerived(id string, b *bolt.Bucket) derived {
	var d derived
	meta := b.Bucket(keyMeta)
	if meta != nil {
		d.LastSeq = store.FromU64(meta.Get(keyLastSeq))
		d.OldestSeq = store.FromU64(meta.Get(keyOldestSeq))
		d.OpenTurn = string(meta.Get(keyOpenTurn))
		d.OpenTurnSeq = store.FromU64(meta.Get(keyOpenTurnSeq))
		d.Lost = store.FromU64(meta.Get(keyLosses))
		if v := meta.Get(keyApprovals); v != nil {
			if err := json.Unmarshal(v, &d.Approvals); err != nil {
				j.log.Warn("journal meta approvals unreadable", "session_id", id, "err", err)
			}
		}
	}
	evb := b.Bucket(keyEvents)
	if evb == nil {
		return d
	}
	c := evb.Cursor()
	lk, _ := c.Last()
	fk, _ := c.First()
	last, first := store.FromU64(lk), store.FromU64(fk)
	if meta != nil && last <= d.LastSeq && (d.OldestSeq <= first || first == 0) {
		return d
	}
	j.log.Warn("journal meta missing or behind its events; rebuilding", "session_id", id,
		"last_seq", d.LastSeq, "last_key", last)
	r := derived{OldestSeq: first, LastSeq: max(last, d.LastSeq)}
	for k, v := c.First(); k != nil; k, v = c.Next() {
		ev, err := decodeEvent(v)
		if err != nil {
			continue
		}
		ev.Seq = store.FromU64(k)
		r.apply(&ev)
	}
	return r
}

// load reads every session's derived state (at Open).
func (j *Journal) load() error {
	return store.View(j.db, func(tx *bolt.Tx) error {
		jb := tx.Bucket(store.BucketJournal)
		if jb == nil {
			return ErrNoBucket
		}
		return jb.ForEach(func(k, v []byte) error {
			if v != nil {
				return nil // not a session bucket
			}
			id := string(k)
			b := jb.Bucket(k)
			if b == nil {
				return fmt.Errorf("session %s: journal bucket vanished", id)
			}
			d := j.loadDerived(id, b)
			j.sessions[id] = &session{d: d, subs: map[*Subscription]struct{}{}, loaded: d.LastSeq, verified: max(d.OldestSeq, 1) - 1}
			return nil
		})
	})
}

// Losses reads, from a store (a daemon's or a copy opened read-only), the
// sessions whose journal records a loss, with the events lost.
func Losses(tx *bolt.Tx) map[string]uint64 {
	out := map[string]uint64{}
	jb := tx.Bucket(store.BucketJournal)
	if jb == nil {
		return out
	}
	_ = jb.ForEachBucket(func(id []byte) error {
		if meta := jb.Bucket(id).Bucket(keyMeta); meta != nil {
			if n := store.FromU64(meta.Get(keyLosses)); n > 0 {
				out[string(id)] = n
			}
		}
		return nil
	})
	return out
}

// Damaged lists, per session, the seqs of journal rows that no longer
// decode (read as journal.corrupt), for doctor; it reads every row.
func Damaged(tx *bolt.Tx) map[string][]uint64 {
	out := map[string][]uint64{}
	jb := tx.Bucket(store.BucketJournal)
	if jb == nil {
		return out
	}
	_ = jb.ForEachBucket(func(id []byte) error {
		evb := jb.Bucket(id).Bucket(keyEvents)
		if evb == nil {
			return nil
		}
		return evb.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				out[string(id)] = append(out[string(id)], 0)
			} else if _, err := decodeEvent(v); err != nil {
				out[string(id)] = append(out[string(id)], store.FromU64(k))
			}
			return nil
		})
	})
	return out
}

// OpenTurn is a turn a journal leaves open: its turn.started is the
// journal's last turn event.
type OpenTurn struct {
	SessionID string
	TurnID    string
	Seq       uint64 // of its turn.started
}

// OpenTurns reads, from a store (a daemon's or a copy opened read-only),
// the journals whose last turn event (read from the end; rows that do not
// decode are passed over) is a turn.started, in session order, and how
// many journals there are: with no daemon, no child runs, so such a turn
// is stuck "working" until a startup closes it.
func OpenTurns(tx *bolt.Tx) (open []OpenTurn, journals int) {
	jb := tx.Bucket(store.BucketJournal)
	if jb == nil {
		return nil, 0
	}
	_ = jb.ForEachBucket(func(id []byte) error {
		journals++
		evb := jb.Bucket(id).Bucket(keyEvents)
		if evb == nil {
			return nil
		}
		cur := evb.Cursor()
		for k, v := cur.Last(); k != nil; k, v = cur.Prev() {
			var ev event.Event
			if json.Unmarshal(v, &ev) != nil {
				continue
			}
			if ev.Type == event.TurnCompleted {
				return nil
			}
			if ev.Type == event.TurnStarted {
				open = append(open, OpenTurn{SessionID: string(id), TurnID: ev.TurnID, Seq: ev.Seq})
				return nil
			}
		}
		return nil
	})
	return open, journals
}
