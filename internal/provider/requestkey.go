package provider

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxRequestKeyID is the longest provider request id text an adapter uses
// as is in a requestId; the prefix (Options.RequestIDPrefix, "f<fence>-")
// adds at most 22 bytes.
const MaxRequestKeyID = 128

// shortKey keeps a request id text of at most MaxRequestKeyID bytes as is
// and names a longer one by "h" + a digest of it. A client sends a
// requestId of at most 256 bytes back; a provider's id is unbounded. The
// adapter keeps the provider's own id to answer it.
func shortKey(id string) string {
	if len(id) <= MaxRequestKeyID {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "h" + hex.EncodeToString(sum[:16])
}
