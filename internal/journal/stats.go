package journal

import (
	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/internal/store"
)

// Stats returns the counters.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.stats
	st.LostBySession = map[string]uint64{}
	if j.unavail != nil {
		st.Unavailable, st.UnavailableSince = j.unavail.Error(), j.unavailAt
	}
	st.Held = j.nheld
	for id, s := range j.sessions {
		st.Subscribers += len(s.subs)
		if s.d.Lost > 0 {
			st.LostBySession[id] = s.d.Lost
		}
	}
	return st
}

func sessionBucket(tx *bolt.Tx, id string) *bolt.Bucket {
	jb := tx.Bucket(store.BucketJournal)
	if jb == nil {
		return nil
	}
	return jb.Bucket([]byte(id))
}
