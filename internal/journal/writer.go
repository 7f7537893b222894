package journal

import (
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

// run is the writer goroutine: group commit until stopped, then commit
// whatever is still queued.
func (j *Journal) run() {
	defer close(j.done)
	for {
		if b := j.take(); len(b) > 0 {
			j.commit(b)
			continue
		}
		select {
		case <-j.wake:
		case <-j.stop:
			if b := j.take(); len(b) > 0 {
				j.commit(b)
				continue
			}
			return
		}
	}
}

// txBuckets are a session's buckets inside one write transaction.
type txBuckets struct {
	root, events, meta *bolt.Bucket
}

// commit writes a batch in one transaction, then installs the new derived
// state, publishes the events and wakes the callers.
func (j *Journal) commit(batch []*request) {
	work := map[string]*derived{}
	deleted := map[string]bool{}
	var n uint64
	err := j.db.Update(func(tx *bolt.Tx) error {
		jb := tx.Bucket(store.BucketJournal)
		if jb == nil {
			return ErrNoBucket
		}
		now := j.opts.Now().UTC().Round(0)
		bks := map[string]*txBuckets{}
		for _, r := range batch {
			if r.del {
				if err := jb.DeleteBucket([]byte(r.id)); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
					return fmt.Errorf("session %s: %w", r.id, err)
				}
				delete(work, r.id)
				delete(bks, r.id)
				deleted[r.id] = true
				continue
			}
			d := work[r.id]
			if d == nil {
				d = &derived{}
				if !deleted[r.id] {
					d = j.current(r.id)
				}
				work[r.id] = d
			}
			tb := bks[r.id]
			if tb == nil {
				var err error
				if tb, err = openBuckets(jb, r.id); err != nil {
					return fmt.Errorf("session %s: %w", r.id, err)
				}
				bks[r.id] = tb
			}
			r.events = make([]event.Event, len(r.drafts))
			for i, dr := range r.drafts {
				d.LastSeq++
				if d.OldestSeq == 0 {
					d.OldestSeq = d.LastSeq
				}
				ev := &r.events[i]
				*ev = event.Event{SessionID: r.id, Seq: d.LastSeq, At: now, Type: dr.Type, TurnID: dr.TurnID, Data: dr.Data}
				v, err := encodeEvent(ev)
				if err != nil {
					return fmt.Errorf("session %s seq %d: %w", r.id, ev.Seq, err)
				}
				if err := tb.events.Put(store.U64(ev.Seq), v); err != nil {
					return fmt.Errorf("session %s seq %d: %w", r.id, ev.Seq, err)
				}
				if cmid, turn := d.apply(ev); cmid != "" {
					dd, err := tb.root.CreateBucketIfNotExists(keyDedup)
					if err == nil {
						err = dd.Put([]byte(cmid), []byte(turn))
					}
					if err != nil {
						return fmt.Errorf("session %s dedup %q: %w", r.id, cmid, err)
					}
				}
				n++
			}
		}
		for id, d := range work {
			tb := bks[id]
			if err := j.retain(d, tb.events); err != nil {
				return fmt.Errorf("session %s retention: %w", id, err)
			}
			if err := d.save(tb.meta); err != nil {
				return fmt.Errorf("session %s meta: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		j.fail(batch, err)
		return
	}
	j.install(batch, work, deleted, n)
}

// current returns a copy of a session's committed derived state. Only the
// writer changes it, so reading it here without the lock is safe; the lock
// guards the map against Subscribe inserting entries.
func (j *Journal) current(id string) *derived {
	j.mu.Lock()
	defer j.mu.Unlock()
	if s := j.sessions[id]; s != nil {
		return s.d.clone()
	}
	return &derived{}
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

func (j *Journal) fail(batch []*request, err error) {
	j.log.Error("journal commit failed", "requests", len(batch), "err", err)
	j.mu.Lock()
	j.stats.Failed++
	j.mu.Unlock()
	for _, r := range batch {
		r.events = nil
		r.err = err
		if r.sink != nil {
			r.sink.setErr(err)
		}
		close(r.done)
	}
}

// install makes a committed batch visible: derived state, then publication
// in commit order, then the callers.
func (j *Journal) install(batch []*request, work map[string]*derived, deleted map[string]bool, n uint64) {
	j.mu.Lock()
	for id := range deleted {
		if s := j.sessions[id]; s != nil {
			for sub := range s.subs {
				sub.end(false)
			}
			delete(j.sessions, id)
		}
	}
	for id, d := range work {
		s := j.sessions[id]
		if s == nil {
			s = &session{subs: map[*Subscription]struct{}{}}
			j.sessions[id] = s
		}
		s.d = *d
	}
	for _, r := range batch {
		s := j.sessions[r.id]
		if s == nil || len(s.subs) == 0 {
			continue
		}
		for i := range r.events {
			for sub := range s.subs {
				if !sub.push(r.events[i]) {
					delete(s.subs, sub)
					j.stats.Lagged++
					j.log.Warn("journal subscriber lagged; detached", "session_id", r.id,
						"seq", r.events[i].Seq)
				}
			}
		}
	}
	j.stats.Commits++
	j.stats.Appends += n
	j.mu.Unlock()
	for _, r := range batch {
		r.prev = nil
		close(r.done)
	}
}
