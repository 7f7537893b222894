package config

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Limits are per-session caps, enforced through the session's cgroup where
// the controller is available (0: none).
type Limits struct {
	Memory int64 // bytes ([limits] memory = "4GiB")
	Pids   int64 // processes and threads ([limits] pids = 512)
}

// Bounds of [limits] and cgroup_root.
const (
	MinMemoryLimit = 4 << 20 // 4 MiB: less cannot start a provider
	// MinPidsLimit: pids.max counts threads, and a Go or Node runtime
	// starts about ten before it runs any code: less cannot start a provider.
	MinPidsLimit   = 16
	MaxMemoryLimit = 1 << 50 // 1 PiB
	MaxPidsLimit   = 4194304 // the kernel's highest pid_max
	MaxCgroupRoot  = 4096    // bytes of the path
)

type fileLimits struct {
	Memory *string `toml:"memory"`
	Pids   *int64  `toml:"pids"`
}

// applyCgroup checks and applies cgroup_root and [limits].
func applyCgroup(f file, c *Config) error {
	if f.CgroupRoot != nil {
		r := *f.CgroupRoot
		if len(r) > MaxCgroupRoot || !filepath.IsAbs(r) {
			return fmt.Errorf("%w: cgroup_root = %q: want an absolute path of at most %d bytes", ErrBadValue, prefix(r), MaxCgroupRoot)
		}
		c.CgroupRoot = filepath.Clean(r)
	}
	if f.Limits.Memory != nil {
		n, err := ParseSize(*f.Limits.Memory)
		if err != nil || n != 0 && (n < MinMemoryLimit || n > MaxMemoryLimit) {
			return fmt.Errorf("%w: limits.memory = %q: want a size such as \"4GiB\" from 4MiB to 1PiB, or 0 for none", ErrBadValue, prefix(*f.Limits.Memory))
		}
		c.Limits.Memory = n
	}
	if f.Limits.Pids != nil {
		if n := *f.Limits.Pids; n != 0 && (n < MinPidsLimit || n > MaxPidsLimit) {
			return fmt.Errorf("%w: limits.pids = %d: want %d .. %d, or 0 for none", ErrBadValue, n, MinPidsLimit, MaxPidsLimit)
		}
		c.Limits.Pids = *f.Limits.Pids
	}
	return nil
}

// sizeUnits are the suffixes ParseSize takes (binary multiples).
var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// ParseSize reads a byte count: digits with an optional unit B, KiB, MiB,
// GiB or TiB ("4GiB", "512MiB", "1048576").
func ParseSize(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if v, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: want digits and a unit B, KiB, MiB, GiB or TiB", prefix(s))
	}
	return n * mult, nil
}
