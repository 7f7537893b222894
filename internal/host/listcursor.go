package host

import (
	"encoding/base64"
	"sort"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/store"
)

// listKey is a session's place in agentSession.list's order: created
// time, then id. A cursor is the last listed session's key, so it stays
// valid whatever is created or deleted between pages (that session
// included): the next page starts after it, skipping no surviving session
// and repeating none.
type listKey struct {
	created int64 // CreatedAt, Unix nanoseconds
	id      string
}

func keyOf(r store.Record) listKey { return listKey{created: r.CreatedAt.UnixNano(), id: r.ID} }

func (k listKey) less(o listKey) bool {
	if k.created != o.created {
		return k.created < o.created
	}
	return k.id < o.id
}

// cursorVersion opens every cursor: a cursor of another layout (or none
// of ours) is refused, never misread.
const cursorVersion = "l1"

// encodeCursor is k as an opaque string: base64url of
// "l1 <stateId> <unix nanos> <session id>".
func encodeCursor(stateID string, k listKey) string {
	raw := strings.Join([]string{cursorVersion, stateID, strconv.FormatInt(k.created, 10), k.id}, " ")
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// decodeCursor is encodeCursor's inverse. A string that is not one of
// ours is invalid_params naming the cursor; so is one issued for another
// state (a state directory replaced since): its order is not this one's.
func decodeCursor(stateID, c string) (listKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	parts := strings.Split(string(b), " ")
	if err != nil || len(parts) != 4 || parts[0] != cursorVersion || parts[3] == "" {
		return listKey{}, notOurCursor(c)
	}
	n, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return listKey{}, notOurCursor(c)
	}
	if parts[1] != stateID {
		return listKey{}, api.InvalidParam("cursor", "stale: issued for state %s, this daemon's is %s; list again without a cursor", api.Quote(parts[1]), stateID)
	}
	return listKey{created: n, id: parts[3]}, nil
}

// listPage is the page of recs (sorted by listKey) after cursor (nil: from
// the first), at most limit long, and the cursor of the page after it
// (nil on the last page).
func listPage(recs []store.Record, after *listKey, limit int, stateID string) ([]store.Record, *string) {
	i := 0
	if after != nil {
		i = sort.Search(len(recs), func(j int) bool { return after.less(keyOf(recs[j])) })
	}
	end := min(i+limit, len(recs))
	page := recs[i:end]
	if end == len(recs) || len(page) == 0 {
		return page, nil
	}
	c := encodeCursor(stateID, keyOf(page[len(page)-1]))
	return page, &c
}

func notOurCursor(c string) error {
	return api.InvalidParam("cursor", "%s is not a cursor this daemon issued: pass a nextCursor back as it was, or no cursor for the first page", api.Quote(c))
}
