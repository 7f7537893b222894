package provider

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxRequestKeyID is the longest provider request id an adapter uses as
// is in a requestId; the prefix (Options.RequestIDPrefix, "f<fence>-")
// adds at most 22 bytes.
const MaxRequestKeyID = 128

// RequestKey is the requestId clients see for the provider's request id
// (a string, or a number's text): prefix + id, or, for an id longer than
// MaxRequestKeyID, prefix + "h" + a digest of it. A client sends a
// requestId of at most 256 bytes back; a provider's id is unbounded. The
// adapter keeps the provider's own id to answer it.
func RequestKey(prefix, id string) string {
	if len(id) > MaxRequestKeyID {
		sum := sha256.Sum256([]byte(id))
		id = "h" + hex.EncodeToString(sum[:16])
	}
	return prefix + id
}
