package journal

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

// Read returns the events with seq > afterSeq, at most limit (0: 256; capped
// at 4096) and at most Options.PageBytes of stored rows (but always one
// event, however big), the journal's end and whether more events follow up
// to it.
// afterSeq beyond the end is a *CursorError matching ErrCursorAhead
// (data.lastSeq); events after afterSeq dropped by retention are
// KindCursorCompacted (data.oldestSeq). The read transaction is closed
// before Read returns.
func (j *Journal) Read(sessionID string, afterSeq uint64, limit int) (evs []event.Event, lastSeq uint64, hasMore bool, err error) {
	j.mu.Lock()
	var d derived
	if s := j.sessions[sessionID]; s != nil {
		d = s.d
	}
	j.mu.Unlock()
	if err := cursorCheck(sessionID, afterSeq, d); err != nil {
		return nil, d.LastSeq, false, err
	}
	evs, hasMore, err = j.readRange(sessionID, afterSeq, d.LastSeq, limit)
	return evs, d.LastSeq, hasMore, err
}

// Subscribe is atomic with publication: under the journal lock it takes the
// session's lastSeq and registers the subscription, which is then handed
// every event with seq > lastSeq; the snapshot (afterSeq, lastSeq] (at most
// limit) is read after the lock is released, so no event is in both or in
// neither. Errors as Read's.
func (j *Journal) Subscribe(sessionID string, afterSeq uint64, limit int) (snap []event.Event, lastSeq uint64, hasMore bool, sub *Subscription, err error) {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil, 0, false, nil, fmt.Errorf("session %s: subscribe: %w", sessionID, ErrClosed)
	}
	s := j.sessions[sessionID]
	if s == nil {
		s = &session{subs: map[*Subscription]struct{}{}}
		j.sessions[sessionID] = s
	}
	d := s.d
	if err := cursorCheck(sessionID, afterSeq, d); err != nil {
		j.mu.Unlock()
		return nil, d.LastSeq, false, nil, err
	}
	sub = newSubscription(j, sessionID)
	s.subs[sub] = struct{}{}
	j.mu.Unlock()

	snap, hasMore, err = j.readRange(sessionID, afterSeq, d.LastSeq, limit)
	if err != nil {
		sub.Close()
		return nil, d.LastSeq, false, nil, err
	}
	return snap, d.LastSeq, hasMore, sub, nil
}

// Cursor errors: Read and Subscribe return a *CursorError matching one.
var (
	// ErrCursorAhead: afterSeq is beyond the journal's end (LastSeq).
	ErrCursorAhead = errors.New("cursor ahead of the journal's end")
	// ErrCursorCompacted: events after afterSeq were dropped by retention;
	// OldestSeq is the first one kept.
	ErrCursorCompacted = errors.New("cursor compacted")
)

// CursorError says where a refused cursor stands against the journal.
type CursorError struct {
	Err       error // ErrCursorAhead or ErrCursorCompacted
	SessionID string
	After     uint64
	LastSeq   uint64
	OldestSeq uint64
}

func (e *CursorError) Error() string {
	if e.Err == ErrCursorAhead {
		return fmt.Sprintf("session %s: cursor %d ahead of the journal's end %d", e.SessionID, e.After, e.LastSeq)
	}
	return fmt.Sprintf("session %s: events after %d compacted; oldest is %d", e.SessionID, e.After, e.OldestSeq)
}

func (e *CursorError) Unwrap() error { return e.Err }

func cursorCheck(id string, after uint64, d derived) error {
	if after > d.LastSeq {
		return &CursorError{Err: ErrCursorAhead, SessionID: id, After: after, LastSeq: d.LastSeq, OldestSeq: d.OldestSeq}
	}
	if d.OldestSeq > 0 && after+1 < d.OldestSeq {
		return compacted(id, after, d.OldestSeq)
	}
	return nil
}

func compacted(id string, after, oldest uint64) error {
	return &CursorError{Err: ErrCursorCompacted, SessionID: id, After: after, OldestSeq: oldest}
}

// readRange copies out the events in (after, upto], at most limit and
// PageBytes (never fewer than one), in one short read transaction. Each
// event carries its row as stored (Event.Raw), for the wire to splice. A
// row that does not decode is logged once and read as a journal.corrupt
// event in its place (seq stays gapless; the damage is visible); a key
// that is no seq is logged once and skipped.
func (j *Journal) readRange(id string, after, upto uint64, limit int) ([]event.Event, bool, error) {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	limit = min(limit, MaxReadLimit)
	if upto <= after {
		return nil, false, nil
	}
	n := min(uint64(limit), upto-after)
	out := make([]event.Event, 0, n)
	var scanned uint64 // seq of the last row looked at
	gap, garbage := false, false
	var rr rowReader
	j.mu.Lock()
	if s := j.sessions[id]; s != nil {
		rr.loaded, rr.verified = s.loaded, s.verified
	}
	j.mu.Unlock()
	err := store.View(j.db, func(tx *bolt.Tx) error {
		b := sessionBucket(tx, id)
		if b == nil {
			return nil
		}
		evb := b.Bucket(keyEvents)
		if evb == nil {
			return nil
		}
		c := evb.Cursor()
		size := 0
		for k, v := c.Seek(store.U64(after + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			if len(k) != 8 {
				j.garbageRow(id, k, errBadRow)
				garbage = true
				continue
			}
			seq := store.FromU64(k)
			if seq > upto {
				break
			}
			if len(out) > 0 && size+len(v) > j.opts.PageBytes {
				break // the byte cap; the first event always goes, so paging progresses
			}
			size += len(v)
			if scanned == 0 && seq != after+1 {
				gap = true
			}
			scanned = seq
			ev, err := rr.event(id, seq, v)
			if err != nil {
				j.garbageRow(id, k, err)
				garbage = true
				ev = corruptRow(id, seq, err)
			}
			out = append(out, ev)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("session %s: read after %d: %w", id, after, err)
	}
	if !garbage && scanned > rr.verified && after <= rr.verified {
		j.mu.Lock()
		if s := j.sessions[id]; s != nil && s.loaded == rr.loaded && s.verified == rr.verified {
			s.verified = scanned // (after, scanned] all read back valid
		}
		j.mu.Unlock()
	}
	if gap || scanned == 0 {
		// Retention may have run since the cursor was checked.
		j.mu.Lock()
		var oldest uint64
		if s := j.sessions[id]; s != nil {
			oldest = s.d.OldestSeq
		}
		j.mu.Unlock()
		if oldest > after+1 {
			return nil, false, compacted(id, after, oldest)
		}
	}
	if scanned == 0 {
		return out, false, nil
	}
	return out, scanned < upto, nil
}

// garbageRow logs an undecodable row (or a key that is no seq) once.
func (j *Journal) garbageRow(id string, key []byte, err error) {
	k := id + "/" + string(key)
	j.garbageMu.Lock()
	seen := j.garbage[k]
	j.garbage[k] = true
	j.garbageMu.Unlock()
	if seen {
		return
	}
	if len(key) == 8 {
		j.log.Warn("journal row does not decode; skipped", "session_id", id, "seq", store.FromU64(key), "err", err)
	} else {
		j.log.Warn("journal key does not decode; skipped", "session_id", id, "key", fmt.Sprintf("%x", key), "err", err)
	}
}

// corruptRow is the journal.corrupt event read in place of the row at seq.
func corruptRow(id string, seq uint64, err error) event.Event {
	data, _ := json.Marshal(event.JournalCorruptData{Cause: err.Error()})
	return event.Event{SessionID: id, Seq: seq, Type: event.JournalCorrupt, Data: data}
}
