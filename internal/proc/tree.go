package proc

import (
	"errors"
	"os"
	"sort"
)

// procEntry is one live (non-zombie) process seen by a /proc pass.
type procEntry struct {
	pid  int
	st   statInfo
	tags Tags // zero unless environ was read and carries our tags
}

// snapshot reads every process's stat (and, with wantEnv, its environ tags)
// in one pass over /proc. Zombies and the calling process are left out.
func (r *statReader) snapshot(wantEnv bool) ([]procEntry, error) {
	pids, err := listPIDs()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	out := make([]procEntry, 0, len(pids))
	var env []byte
	for _, pid := range pids {
		if pid == self {
			continue
		}
		st, err := r.read(pid)
		if err != nil || st.zombie() {
			continue // gone meanwhile, or exited
		}
		e := procEntry{pid: pid, st: st}
		if wantEnv {
			env, err = r.environ(pid, env)
			if err == nil {
				e.tags, _ = envTags(env)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// treeQuery names a session's process tree: the live descendants of the
// known members, the members of a process group, and tagged processes.
type treeQuery struct {
	known []Identity // walked for descendants if still alive
	group int        // process group to include; 0 for none
	sid   int        // the group's session: members of another session are not ours
	tags  Tags       // empty: no tag match
}

// inGroup reports whether p is a member of the query's process group. A
// group id is a pid number: it cannot be reused while the group has a
// member, but once empty it can, so a member must also be in the group's
// session and carry no other session's tags.
func (q treeQuery) inGroup(p procEntry) bool {
	if q.group <= 0 || p.st.PGID != q.group || p.st.SID != q.sid {
		return false
	}
	return p.tags.Owner() == "" || q.tags.empty() || q.tags.matches(p.tags)
}

// tree returns the live members of the tree described by q, by pid.
func (r *statReader) tree(q treeQuery) (map[int]Identity, error) {
	boot, err := BootID()
	if err != nil {
		return nil, err
	}
	procs, err := r.snapshot(!q.tags.empty())
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	byPID := make(map[int]procEntry, len(procs))
	for _, p := range procs {
		byPID[p.pid] = p
		children[p.st.PPID] = append(children[p.st.PPID], p.pid)
	}
	out := map[int]Identity{}
	add := func(p procEntry) bool {
		if _, ok := out[p.pid]; ok {
			return false
		}
		out[p.pid] = Identity{PID: p.pid, StartTicks: p.st.StartTicks, BootID: boot}
		return true
	}
	for _, p := range procs {
		if q.inGroup(p) || q.tags.matches(p.tags) {
			add(p)
		}
	}
	for _, id := range q.known {
		if p, ok := byPID[id.PID]; ok && p.st.StartTicks == id.StartTicks {
			add(p)
		}
	}
	// descendants of everything found so far
	queue := make([]int, 0, len(out))
	for pid := range out {
		queue = append(queue, pid)
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if add(byPID[c]) {
				queue = append(queue, c)
			}
		}
	}
	return out, nil
}

// Tagged is a live process carrying our env tags: a session's
// (SessionID, Fence) or a shared runtime's (RuntimeID).
type Tagged struct {
	Identity
	SessionID string
	Fence     uint64
	RuntimeID string
}

// Tags are the tags t was found with, under stateID.
func (t Tagged) Tags(stateID string) Tags {
	return Tags{SessionID: t.SessionID, Fence: t.Fence, RuntimeID: t.RuntimeID, StateID: stateID}
}

// ScanTagged lists every live process whose environ carries
// SESSIOND_STATE_ID=stateID and a session's or a runtime's id.
// ErrCannotEnumerate when /proc cannot be read: it never answers "none"
// when it could not look.
func ScanTagged(stateID string) ([]Tagged, error) {
	if stateID == "" {
		return nil, errors.New("proc: ScanTagged: empty state id")
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
	procs, err := r.snapshot(true)
	if err != nil {
		return nil, err
	}
	var out []Tagged
	for _, p := range procs {
		if p.tags.StateID != stateID || p.tags.Owner() == "" {
			continue
		}
		out = append(out, Tagged{
			Identity:  Identity{PID: p.pid, StartTicks: p.st.StartTicks, BootID: boot},
			SessionID: p.tags.SessionID, Fence: p.tags.Fence, RuntimeID: p.tags.RuntimeID,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

func sortedIDs(m map[int]Identity) []Identity {
	out := make([]Identity, 0, len(m))
	for _, id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}
