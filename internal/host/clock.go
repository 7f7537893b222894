package host

import (
	"time"

	"github.com/sessiond/sessiond/internal/proc"
)

// Clock is the time source of the release clock, TTLs and retries;
// tests inject a fake one.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// procClock lets proc's bounded cleanup run on the host's clock.
type procClock struct{ c Clock }

func (p procClock) Now() time.Time { return p.c.Now() }

func (p procClock) AfterFunc(d time.Duration, f func()) proc.Timer { return p.c.AfterFunc(d, f) }
