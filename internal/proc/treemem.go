package proc

import "fmt"

// TreeMemory is one process tree's memory: RSS and PSS summed over its
// live processes (the root and its descendants), and how many were summed.
type TreeMemory struct {
	RSS, PSS int64
	Procs    int
}

// TreesMemory reads the memory of the trees rooted at each of roots with
// one pass over /proc for all of them (a status call with many runtimes
// pays one pass, not one per runtime), then statm and smaps_rollup of each
// member. A root that is gone or unreadable is left out of the map; a
// descendant that exits between the pass and its read is left out of its
// sum. ErrCannotEnumerate (wrapped in ErrPSS) when /proc cannot be read.
func TreesMemory(roots []int) (map[int]TreeMemory, error) {
	out := make(map[int]TreeMemory, len(roots))
	if len(roots) == 0 {
		return out, nil
	}
	r, err := newStatReader()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPSS, err)
	}
	defer r.close()
	procs, err := r.snapshot(false)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPSS, err)
	}
	children := map[int][]int{}
	live := make(map[int]bool, len(procs))
	for _, p := range procs {
		live[p.pid] = true
		children[p.st.PPID] = append(children[p.st.PPID], p.pid)
	}
	for _, root := range roots {
		if !live[root] {
			continue
		}
		var m TreeMemory
		ok := true
		seen := map[int]bool{root: true}
		for queue := []int{root}; len(queue) > 0; {
			pid := queue[0]
			queue = queue[1:]
			for _, c := range children[pid] {
				if !seen[c] {
					seen[c] = true
					queue = append(queue, c)
				}
			}
			pss, err := PSS(pid)
			if err != nil {
				if pid == root {
					ok = false
					break
				}
				continue // exited since the pass, or unreadable: not summed
			}
			rss, err := RSS(pid)
			if err != nil {
				continue
			}
			m.PSS += pss
			m.RSS += rss
			m.Procs++
		}
		if ok {
			out[root] = m
		}
	}
	return out, nil
}
