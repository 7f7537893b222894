package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// ErrPSS is wrapped by every error of PSS and TreePSS: the figure could
// not be read or parsed.
var ErrPSS = errors.New("proc: cannot read PSS")

// maxPSSKiB is the largest Pss value (in kB) whose byte count fits an
// int64.
const maxPSSKiB = math.MaxInt64 / 1024

// PSS is a process's proportional set size in bytes, from the "Pss:" line
// of /proc/PID/smaps_rollup (Linux 4.14+): each page it maps counted
// divided by the number of processes mapping it, so the PSS of several
// processes adds up to what they really hold, where RSS counts a shared
// page once per process. The error names the pid and the file.
func PSS(pid int) (int64, error) {
	path := filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("%w: pid %d: %w", ErrPSS, pid, err)
	}
	n, err := parsePSS(b)
	if err != nil {
		return 0, fmt.Errorf("%w: pid %d: %s: %w", ErrPSS, pid, path, err)
	}
	return n, nil
}

// errNoMM is an empty smaps_rollup: the process has no memory map (it
// exited and is a zombie, or it is a kernel thread).
var errNoMM = errors.New("empty: no memory map (exited, or a kernel thread)")

// parsePSS reads the "Pss:" line of a smaps_rollup text: "Pss: N kB".
func parsePSS(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, errNoMM
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 || !bytes.Equal(f[0], []byte("Pss:")) {
			continue
		}
		if len(f) != 3 || !bytes.Equal(f[2], []byte("kB")) {
			return 0, fmt.Errorf("the Pss line %q: want \"Pss: N kB\"", sc.Bytes())
		}
		kib, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("the Pss line %q: %w", sc.Bytes(), err)
		}
		if kib > maxPSSKiB {
			return 0, fmt.Errorf("the Pss value %d kB is over the limit of %d kB", kib, int64(maxPSSKiB))
		}
		return int64(kib) * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no Pss line")
}

// TreePSS is the PSS summed over the live process tree rooted at pid (pid
// and its descendants, one pass over /proc, the walk the ladder uses) and
// the number of processes summed. A descendant that exits between the pass
// and its read is left out; the root's own error is returned.
func TreePSS(pid int) (total int64, procs int, err error) {
	r, err := newStatReader()
	if err != nil {
		return 0, 0, fmt.Errorf("%w: pid %d: %w", ErrPSS, pid, err)
	}
	defer r.close()
	root, _, err := identityOf(r, pid)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: pid %d: %w", ErrPSS, pid, err)
	}
	tree, err := r.tree(treeQuery{known: []Identity{root}})
	if err != nil {
		return 0, 0, fmt.Errorf("%w: pid %d: %w", ErrPSS, pid, err)
	}
	if _, ok := tree[pid]; !ok {
		return 0, 0, fmt.Errorf("%w: pid %d: %w", ErrPSS, pid, fs.ErrNotExist)
	}
	for p := range tree {
		n, err := PSS(p)
		if err != nil {
			if p == pid {
				return 0, 0, err
			}
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) || errors.Is(err, errNoMM) {
				continue // exited since the pass
			}
			return 0, 0, err
		}
		if total > math.MaxInt64-n {
			return 0, 0, fmt.Errorf("%w: pid %d: tree sum over the limit of %d bytes", ErrPSS, pid, int64(math.MaxInt64))
		}
		total += n
		procs++
	}
	return total, procs, nil
}
