package host

import (
	"crypto/hmac"
	"crypto/sha256"
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
const cursorVersion = "l2"

// cursorMACLen is how much of the HMAC-SHA-256 a cursor carries.
const cursorMACLen = 16

// encodeCursor is k as an opaque string: base64url of the payload
// "l2 <stateId> <unix nanos> <session id>" followed by the first 16 bytes
// of its HMAC-SHA-256 under key (the store's cursor_key: secret, and kept
// across restarts, so a cursor the daemon issued stays valid after one and
// no other string, a cut or edited cursor included, passes).
func encodeCursor(key []byte, stateID string, k listKey) string {
	raw := strings.Join([]string{cursorVersion, stateID, strconv.FormatInt(k.created, 10), k.id}, " ")
	return base64.RawURLEncoding.EncodeToString(append([]byte(raw), cursorMAC(key, raw)...))
}

func cursorMAC(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return m.Sum(nil)[:cursorMACLen]
}

// decodeCursor is encodeCursor's inverse. A string that is not one of
// ours (its MAC does not check) is invalid_params naming the cursor; so
// is one issued for another state (a state directory replaced since): its
// order is not this one's.
func decodeCursor(key []byte, stateID, c string) (listKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) <= cursorMACLen {
		return listKey{}, notOurCursor(c)
	}
	raw, mac := string(b[:len(b)-cursorMACLen]), b[len(b)-cursorMACLen:]
	parts := strings.Split(raw, " ")
	if len(parts) != 4 || parts[0] != cursorVersion || parts[3] == "" {
		return listKey{}, notOurCursor(c)
	}
	n, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return listKey{}, notOurCursor(c)
	}
	if parts[1] != stateID {
		// Another store's key signed it: say stale, not forged.
		return listKey{}, api.InvalidParam("cursor", "stale: issued for state %s, this daemon's is %s; list again without a cursor", api.Quote(parts[1]), stateID)
	}
	if !hmac.Equal(mac, cursorMAC(key, raw)) {
		return listKey{}, notOurCursor(c)
	}
	return listKey{created: n, id: parts[3]}, nil
}

// listPage is the page of recs (sorted by listKey) after cursor (nil: from
// the first), at most limit long, and the cursor of the page after it
// (nil on the last page).
func listPage(recs []store.Record, after *listKey, limit int, key []byte, stateID string) ([]store.Record, *string) {
	i := 0
	if after != nil {
		i = sort.Search(len(recs), func(j int) bool { return after.less(keyOf(recs[j])) })
	}
	end := min(i+limit, len(recs))
	page := recs[i:end]
	if end == len(recs) || len(page) == 0 {
		return page, nil
	}
	c := encodeCursor(key, stateID, keyOf(page[len(page)-1]))
	return page, &c
}

func notOurCursor(c string) error {
	return api.InvalidParam("cursor", "%s is not a cursor this daemon issued: pass a nextCursor back as it was, or no cursor for the first page", api.Quote(c))
}
