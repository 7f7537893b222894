package config

import (
	"fmt"
	"time"
)

// Ranges of the durations and sizes (docs/protocol.md "Configuration").
// A value outside its range is refused at load, naming the key and the
// range. The maxima keep every budget computed from them (internal/budget)
// far from overflow: all of them at once sum to hours, not centuries.
const (
	// MinIdleTimeout is the least idle_timeout: a released session is
	// evicted (almost) at once.
	MinIdleTimeout = time.Millisecond
	// MinTimeout is the least step_timeout, write_timeout,
	// initialize_timeout and ladder.kill_timeout: less cannot work on a
	// loaded machine (at 1ms every eviction step fails and the session
	// stays evicting; an initialize races its client's first write).
	// The ladder's grace and term_timeout may be 0: the next signal at once.
	MinTimeout = 100 * time.Millisecond
	// MinStartTimeout is the least start_timeout: a spawn and a provider
	// handshake (the echo provider's takes ~30 ms unloaded).
	MinStartTimeout = time.Second
	// MaxIdleTimeout bounds idle_timeout: a released session stays live
	// at most 30 days.
	MaxIdleTimeout = 30 * 24 * time.Hour
	// MaxTimeout bounds start_timeout, step_timeout, write_timeout and
	// initialize_timeout.
	MaxTimeout = time.Hour
	// MaxLadderWait bounds each of the ladder's grace, term_timeout and
	// kill_timeout.
	MaxLadderWait = 10 * time.Minute

	MinMaxMessageBytes  = 4 << 10  // max_message_bytes: 4 KiB
	MaxMaxMessageBytes  = 64 << 20 // 64 MiB
	MinMaxOutboundBytes = 1 << 20  // max_outbound_bytes: 1 MiB
	MaxMaxOutboundBytes = 1 << 40  // 1 TiB
	MinMaxConnections   = 1
	MaxMaxConnections   = 1 << 20
	MinPortableHistory  = 1 << 10  // portable_history_bytes: 1 KiB
	MaxPortableHistory  = 16 << 20 // 16 MiB
)

// DurationRange is one duration key's accepted range, both ends included.
type DurationRange struct {
	Key      string
	Min, Max time.Duration
}

// DurationRanges lists every duration key with its range, in the order of
// the docs' table.
var DurationRanges = []DurationRange{
	{"idle_timeout", MinIdleTimeout, MaxIdleTimeout},
	{"start_timeout", MinStartTimeout, MaxTimeout},
	{"step_timeout", MinTimeout, MaxTimeout},
	{"write_timeout", MinTimeout, MaxTimeout},
	{"initialize_timeout", MinTimeout, MaxTimeout},
	{"ladder.grace", 0, MaxLadderWait},
	{"ladder.term_timeout", 0, MaxLadderWait},
	{"ladder.kill_timeout", MinTimeout, MaxLadderWait},
}

// SizeRange is one integer key's accepted range, both ends included.
type SizeRange struct {
	Key      string
	Min, Max int64
}

// SizeRanges lists the integer keys with their ranges ([limits] has its
// own, in limits.go: 0 there means none).
var SizeRanges = []SizeRange{
	{"max_message_bytes", MinMaxMessageBytes, MaxMaxMessageBytes},
	{"max_outbound_bytes", MinMaxOutboundBytes, MaxMaxOutboundBytes},
	{"max_connections", MinMaxConnections, MaxMaxConnections},
	{"portable_history_bytes", MinPortableHistory, MaxPortableHistory},
}

// String is the range as the error and the docs give it: "100ms .. 1h".
func (r DurationRange) String() string { return FormatDuration(r.Min) + " .. " + FormatDuration(r.Max) }

// String is the range as the error and the docs give it: "4096 .. 67108864".
func (r SizeRange) String() string { return fmt.Sprintf("%d .. %d", r.Min, r.Max) }

// FormatDuration writes d in its largest whole unit (h, m, s, ms, else
// Duration.String), a form time.ParseDuration reads back.
func FormatDuration(d time.Duration) string {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d != 0 && d%u.unit == 0 {
			return fmt.Sprintf("%d%s", d/u.unit, u.name)
		}
	}
	if d == 0 {
		return "0"
	}
	return d.String()
}

// durationRange is key's range (every duration key has one).
func durationRange(key string) DurationRange {
	for _, r := range DurationRanges {
		if r.Key == key {
			return r
		}
	}
	panic("config: no range for " + key)
}

// sizeRange is key's range (every integer key has one).
func sizeRange(key string) SizeRange {
	for _, r := range SizeRanges {
		if r.Key == key {
			return r
		}
	}
	panic("config: no range for " + key)
}

// parseDuration reads key's value and checks its range.
func parseDuration(key, s string) (time.Duration, error) {
	r := durationRange(key)
	v, err := time.ParseDuration(s)
	if err != nil || v < r.Min || v > r.Max {
		return 0, fmt.Errorf("%w: %s = %q: want a duration from %s to %s, such as \"1500ms\" or \"2s\"",
			ErrBadValue, key, prefix(s), FormatDuration(r.Min), FormatDuration(r.Max))
	}
	return v, nil
}

// checkSize checks key's integer value against its range.
func checkSize(key string, n int64) error {
	if r := sizeRange(key); n < r.Min || n > r.Max {
		return fmt.Errorf("%w: %s = %d: want %s", ErrBadValue, key, n, r)
	}
	return nil
}
