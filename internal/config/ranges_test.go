package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// setKey is TOML text setting key (a dotted ladder key goes in its table).
func setKey(key, value string) string {
	if k, ok := strings.CutPrefix(key, "ladder."); ok {
		return fmt.Sprintf("[ladder]\n%s = %s\n", k, value)
	}
	return fmt.Sprintf("%s = %s\n", key, value)
}

// durationOf reads key's value out of c.
func durationOf(c Config, key string) time.Duration {
	return map[string]time.Duration{
		"idle_timeout": c.IdleTimeout, "start_timeout": c.StartTimeout, "step_timeout": c.StepTimeout,
		"write_timeout": c.WriteTimeout, "initialize_timeout": c.InitializeTimeout,
		"ladder.grace": c.Ladder.Grace, "ladder.term_timeout": c.Ladder.TermTimeout, "ladder.kill_timeout": c.Ladder.KillTimeout,
	}[key]
}

// TestDurationRanges: each duration key takes both ends of its range and
// refuses a value just past either, naming the key and the range.
func TestDurationRanges(t *testing.T) {
	noCodex(t)
	for _, r := range DurationRanges {
		t.Run(r.Key, func(t *testing.T) {
			for _, v := range []time.Duration{r.Min, r.Max} {
				c := Default()
				if err := Parse(setKey(r.Key, fmt.Sprintf("%q", v.String())), &c); err != nil || durationOf(c, r.Key) != v {
					t.Fatalf("%s = %s: err %v, got %s", r.Key, v, err, durationOf(c, r.Key))
				}
			}
			want := fmt.Sprintf("%s = ", r.Key)
			rng := fmt.Sprintf("from %s to %s", FormatDuration(r.Min), FormatDuration(r.Max))
			for _, v := range []time.Duration{r.Min - time.Nanosecond, r.Max + time.Nanosecond, 1000000 * time.Hour} {
				c := Default()
				err := Parse(setKey(r.Key, fmt.Sprintf("%q", v.String())), &c)
				if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), rng) {
					t.Errorf("%s = %s: err %v, want ErrBadValue naming %q and %q", r.Key, v, err, want, rng)
				}
			}
		})
	}
}

// TestSizeRanges: each integer key takes both ends of its range and
// refuses a value just past either, naming the key and the range.
func TestSizeRanges(t *testing.T) {
	noCodex(t)
	for _, r := range SizeRanges {
		t.Run(r.Key, func(t *testing.T) {
			for _, n := range []int64{r.Min, r.Max} {
				c := Default()
				if err := Parse(setKey(r.Key, fmt.Sprint(n)), &c); err != nil {
					t.Fatalf("%s = %d: %v", r.Key, n, err)
				}
			}
			for _, n := range []int64{r.Min - 1, r.Max + 1} {
				c := Default()
				err := Parse(setKey(r.Key, fmt.Sprint(n)), &c)
				if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), fmt.Sprintf("%s = %d: want %s", r.Key, n, r)) {
					t.Errorf("%s = %d: err %v, want ErrBadValue naming the key and %s", r.Key, n, err, r)
				}
			}
		})
	}
	c := Default()
	if err := Parse("max_message_bytes = 65536\nmax_outbound_bytes = 2097152\nmax_connections = 7\n", &c); err != nil ||
		c.MaxMessageBytes != 65536 || c.MaxOutboundBytes != 2<<20 || c.MaxConnections != 7 {
		t.Fatalf("sizes not applied: err %v, %d %d %d", err, c.MaxMessageBytes, c.MaxOutboundBytes, c.MaxConnections)
	}
}

// TestBadValueEchoesPrefix: a long bad value is echoed as a short prefix.
func TestBadValueEchoesPrefix(t *testing.T) {
	c := Default()
	long := strings.Repeat("9", 5000) + "h"
	err := Parse(setKey("step_timeout", fmt.Sprintf("%q", long)), &c)
	if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), "step_timeout") || len(err.Error()) > 300 {
		t.Fatalf("err (%d bytes) %.400v", len(err.Error()), err)
	}
}

// TestRangesDocumented: docs/protocol.md's configuration table and
// testdata/configs/full.toml's comments give every key's range as the
// code checks it.
func TestRangesDocumented(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, file := range []string{filepath.Join("docs", "protocol.md"), filepath.Join("testdata", "configs", "full.toml")} {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		check := func(key, rng string) {
			name := key[strings.LastIndex(key, ".")+1:]
			for _, l := range lines {
				if (strings.Contains(l, "`"+key+"`") || strings.HasPrefix(l, name+" =")) && strings.Contains(l, rng) {
					return
				}
			}
			t.Errorf("%s: no line names %s with its range %q", file, key, rng)
		}
		for _, r := range DurationRanges {
			check(r.Key, r.String())
		}
		for _, r := range SizeRanges {
			check(r.Key, r.String())
		}
	}
}
