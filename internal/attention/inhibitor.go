package attention

import (
	"context"
	"errors"
	"io"
)

// Inhibitor takes sleep inhibitors. Implementations: Logind (Linux) and
// Caffeinate (macOS, not verified at runtime here).
type Inhibitor interface {
	// Name names the mechanism in logs and status ("logind", "caffeinate").
	Name() string
	// Probe reports whether Inhibit can work, taking nothing.
	Probe(ctx context.Context) error
	// Inhibit takes one inhibitor until the returned Closer is closed.
	Inhibit(ctx context.Context, why string) (io.Closer, error)
}

// ErrUnavailable wraps every reason an inhibitor cannot be had.
var ErrUnavailable = errors.New("sleep inhibitor unavailable")
