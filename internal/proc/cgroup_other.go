//go:build !linux

package proc

import (
	"context"
	"log/slog"
	"os"
	"syscall"
	"time"
)

// Cgroups is Linux only: elsewhere OpenCgroups always answers fallback.
type Cgroups struct{}

type sessionCgroup struct{}

// OpenCgroups answers fallback: cgroups are a Linux facility.
func OpenCgroups(o CgroupOptions, _ *slog.Logger) (*Cgroups, CgroupStatus) {
	st := CgroupStatus{Mode: ModeFallback, Reason: "cgroups are Linux only", Controllers: []string{}}
	if o.Limits.Memory > 0 {
		st.Notes = append(st.Notes, "memory: cgroups are Linux only: limit not enforced")
	}
	if o.Limits.Pids > 0 {
		st.Notes = append(st.Notes, "pids: cgroups are Linux only: limit not enforced")
	}
	return nil, st
}

func (g *Cgroups) Status() CgroupStatus { return CgroupStatus{Mode: ModeFallback} }
func (g *Cgroups) Close()               {}
func (g *Cgroups) Dir() string          { return "" }
func (g *Cgroups) ReapStale(context.Context, time.Duration) (int, []Identity, error) {
	return 0, nil, nil
}

func (spec Spec) intoCgroup(*syscall.SysProcAttr) (*sessionCgroup, *os.File, error) {
	return nil, nil, nil
}

func (g *Cgroups) Base() string { return "" }

// Inotify is nil outside Linux.
func (g *Cgroups) Inotify() syscall.Conn { return nil }

func (g *Cgroups) adoptCgroup(Tags, int, func(string)) (*sessionCgroup, error) { return nil, nil }

func (s *sessionCgroup) arm()          {}
func (s *sessionCgroup) remove() error { return nil }
func (s *sessionCgroup) reladder(context.Context, Ladder) Verdict {
	return Verdict{Root: Exited, Tree: Unverifiable}
}

func (c *Child) stopCgroup(context.Context, Ladder) Verdict {
	return Verdict{Root: Unverifiable, Tree: Unverifiable}
}

// Usage is unavailable outside Linux.
func (c *Child) Usage() (Usage, bool) { return Usage{}, false }

// Cgroup is "" outside Linux.
func (c *Child) Cgroup() string { return "" }
