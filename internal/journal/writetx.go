package journal

import (
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// txBuckets are a session's buckets inside one write transaction.
type txBuckets struct {
	root, events, meta *bolt.Bucket
}

// attempt is what one transaction over a batch derived.
type attempt struct {
	work    map[string]*derived
	deleted map[string]bool
	bks     map[string]*txBuckets
	n       uint64 // events written
	skipped uint64 // drafts of a turn failed by a loss, not written
	now     time.Time
}

// try writes batch in one transaction. On failure, blame names the
// requests whose own content caused it (nil: the store failed as a whole,
// e.g. at commit: the error wraps store.ErrUnavailable); retrying without
// them can succeed.
func (j *Journal) try(batch []*request) (a *attempt, blame []*request, err error) {
	a = &attempt{work: map[string]*derived{}, deleted: map[string]bool{}, bks: map[string]*txBuckets{},
		now: j.opts.Now().UTC().Round(0)}
	err = store.Update(j.db, func(tx *bolt.Tx) error {
		jb := tx.Bucket(store.BucketJournal)
		if jb == nil {
			return ErrNoBucket
		}
		for _, r := range batch {
			if err := j.writeRequest(jb, a, r); err != nil {
				blame = []*request{r}
				return err
			}
		}
		for id, d := range a.work {
			tb := a.bks[id]
			if err := j.retain(d, tb.events); err != nil {
				blame = requestsOf(batch, id)
				return fmt.Errorf("session %s retention: %w", id, err)
			}
			if err := d.save(tb.meta); err != nil {
				blame = requestsOf(batch, id)
				return fmt.Errorf("session %s meta: %w", id, err)
			}
		}
		return nil
	})
	if err == nil {
		blame = nil
	}
	return a, blame, err
}

func requestsOf(batch []*request, id string) []*request {
	var out []*request
	for _, r := range batch {
		if r.id == id {
			out = append(out, r)
		}
	}
	return out
}

// writeRequest writes one request's rows (or deletes its session).
func (j *Journal) writeRequest(jb *bolt.Bucket, a *attempt, r *request) error {
	r.events = nil
	if r.probe {
		return nil
	}
	if r.del {
		if err := jb.DeleteBucket([]byte(r.id)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return fmt.Errorf("session %s: %w", r.id, err)
		}
		delete(a.work, r.id)
		delete(a.bks, r.id)
		a.deleted[r.id] = true
		return nil
	}
	d := a.work[r.id]
	if d == nil {
		d = &derived{}
		if !a.deleted[r.id] {
			d = j.current(r.id)
		}
		a.work[r.id] = d
	}
	tb := a.bks[r.id]
	if tb == nil {
		var err error
		if tb, err = openBuckets(jb, r.id); err != nil {
			return fmt.Errorf("session %s: %w", prefix(r.id), err)
		}
		a.bks[r.id] = tb
	}
	drafts := r.drafts
	if r.loss != nil {
		drafts = d.lossDrafts(r.loss)
	}
	r.events = make([]event.Event, 0, len(drafts))
	for _, dr := range drafts {
		if r.loss == nil && d.lostTurn != "" && dr.TurnID == d.lostTurn {
			a.skipped++ // its turn was failed by a loss: nothing more of it is journaled
			continue
		}
		d.LastSeq++
		if d.OldestSeq == 0 {
			d.OldestSeq = d.LastSeq
		}
		r.events = append(r.events, event.Event{SessionID: r.id, Seq: d.LastSeq, At: a.now, Type: dr.Type, TurnID: dr.TurnID, Data: dr.Data})
		ev := &r.events[len(r.events)-1]
		ev.Raw = event.AppendJSON(make([]byte, 0, event.EncodedSize(ev)), ev) // stored, and published as is
		if err := tb.events.Put(store.U64(ev.Seq), ev.Raw); err != nil {
			return fmt.Errorf("session %s seq %d: %w", r.id, ev.Seq, err)
		}
		if cmid, turn := d.apply(ev); cmid != "" {
			dd, err := tb.root.CreateBucketIfNotExists(keyDedup)
			if err == nil {
				err = dd.Put([]byte(cmid), []byte(turn))
			}
			if err != nil {
				return fmt.Errorf("session %s dedup index, clientMessageId %q (%d bytes): %w", r.id, prefix(cmid), len(cmid), err)
			}
		}
		a.n++
	}
	return nil
}

// prefix is at most the first 32 bytes of s, for messages about bad input.
func prefix(s string) string {
	if len(s) <= 32 {
		return s
	}
	return s[:32] + "…"
}

func openBuckets(jb *bolt.Bucket, id string) (*txBuckets, error) {
	root, err := jb.CreateBucketIfNotExists([]byte(id))
	if err != nil {
		return nil, err
	}
	tb := &txBuckets{root: root}
	if tb.events, err = root.CreateBucketIfNotExists(keyEvents); err != nil {
		return nil, err
	}
	tb.events.FillPercent = 0.95 // keys only ever grow: pack pages
	if tb.meta, err = root.CreateBucketIfNotExists(keyMeta); err != nil {
		return nil, err
	}
	return tb, nil
}

// retain drops the oldest events beyond MaxEvents, never an open turn's
// turn.started (nor anything after it).
func (j *Journal) retain(d *derived, evb *bolt.Bucket) error {
	max := uint64(j.opts.MaxEvents)
	if d.LastSeq-d.OldestSeq+1 <= max {
		return nil
	}
	keep := d.LastSeq - max + 1
	if d.OpenTurn != "" && d.OpenTurnSeq != 0 && d.OpenTurnSeq < keep {
		keep = d.OpenTurnSeq
	}
	for s := d.OldestSeq; s < keep; s++ {
		if err := evb.Delete(store.U64(s)); err != nil {
			return err
		}
	}
	if keep > d.OldestSeq {
		d.OldestSeq = keep
	}
	return nil
}
