package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
)

// ErrBadEnvPair is ScanEnv's error for a pair that is not NAME=VALUE.
var ErrBadEnvPair = errors.New("proc: ScanEnv: want NAME=VALUE")

// ScanEnv lists every live (non-zombie) process, other than the caller,
// whose environment holds exactly the entry kv ("NAME=VALUE"), by identity
// (pid and start time: safe to signal later through Probe or the ladder),
// sorted by pid. It finds what a provider marks with its own variable and
// a descendant inherits: codex sets CODEX_THREAD_ID=<thread id> on every
// command it runs for a thread. ErrCannotEnumerate when the process table
// cannot be read: it never answers "none" when it could not look.
// Processes whose environment cannot be read (another user's, gone
// meanwhile) are left out.
func ScanEnv(kv string) ([]Identity, error) {
	name, _, ok := strings.Cut(kv, "=")
	if !ok || name == "" || strings.ContainsRune(kv, 0) {
		return nil, fmt.Errorf("%w: got %q", ErrBadEnvPair, kv)
	}
	r, err := newStatReader()
	if err != nil {
		return nil, err
	}
	defer r.close()
	boot, err := BootID()
	if err != nil {
		return nil, errors.Join(ErrCannotEnumerate, err)
	}
	pids, err := listPIDs()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	want := []byte(kv)
	var out []Identity
	var env []byte
	for _, pid := range pids {
		if pid == self {
			continue
		}
		st, err := r.read(pid)
		if err != nil || st.zombie() {
			continue
		}
		if env, err = r.environ(pid, env); err != nil {
			continue
		}
		for rest := env; len(rest) > 0; {
			var entry []byte
			entry, rest, _ = bytes.Cut(rest, []byte{0})
			if bytes.Equal(entry, want) {
				out = append(out, Identity{PID: pid, StartTicks: st.StartTicks, BootID: boot})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}
