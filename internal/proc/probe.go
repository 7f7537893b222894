package proc

import "errors"

// Probe answers whether the identified process runs. A few syscalls, no
// shell. A zombie is not alive.
func Probe(id Identity) State {
	return ProbeMany([]Identity{id})[0]
}

// ProbeMany probes many identities in one sweep. The boot id is read once;
// an identity seen alive before is answered from the pidfd kept for it (one
// poll for all of them: a pidfd names exactly one process, so a quiet one
// is still that process, alive); a verdict of gone is final and
// remembered. Anything else costs an openat, a read and a close of
// /proc/<pid>/stat into a reused buffer.
func ProbeMany(ids []Identity) []State {
	out := make([]State, len(ids))
	boot, _ := BootID()
	cache.Lock()
	defer cache.Unlock()
	cache.sweep++
	pending := cache.resolveLocked(ids, boot, out)
	if len(pending) == 0 {
		return out
	}
	r, err := newStatReader()
	if err != nil {
		for _, i := range pending {
			out[i] = Unverifiable
		}
		return out
	}
	defer r.close()
	for _, i := range pending {
		out[i] = cache.probeSlowLocked(r, ids[i], boot)
	}
	return out
}

// probeOne probes id afresh, bypassing the cache (used right before a
// signal).
func probeOne(r *statReader, id Identity) State {
	boot, _ := BootID()
	return probeWithBoot(r, id, boot)
}

func probeWithBoot(r *statReader, id Identity, boot string) State {
	if id.PID <= 0 {
		return PidAbsent
	}
	if id.BootID != "" && boot != "" && id.BootID != boot {
		return BootChanged
	}
	st, err := r.read(id.PID)
	switch {
	case errors.Is(err, errNoProc):
		return PidAbsent // absent now means absent on any boot
	case err != nil:
		return Unverifiable
	case id.BootID == "" || boot == "":
		if st.zombie() {
			return PidAbsent
		}
		return Unverifiable // cannot tell this boot's pid from another's
	case st.StartTicks != id.StartTicks:
		return IdentityMismatch
	case st.zombie():
		return PidAbsent
	}
	return Alive
}

// identityOf reads the identity of a running pid.
func identityOf(r *statReader, pid int) (Identity, statInfo, error) {
	st, err := r.read(pid)
	if err != nil {
		return Identity{}, st, err
	}
	boot, err := BootID()
	if err != nil {
		return Identity{}, st, err
	}
	return Identity{PID: pid, StartTicks: st.StartTicks, BootID: boot}, st, nil
}
