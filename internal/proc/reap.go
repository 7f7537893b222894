package proc

import (
	"context"
	"log/slog"
	"os"
)

// Reap stops a process of a previous daemon known only by its recorded
// identity, with the processes carrying its tags and its recorded group and
// descendants: SIGTERM, TermTimeout, SIGKILL, KillTimeout (no stdin to close,
// so no grace). Every signal is identity-checked right before it is sent; a
// pid now held by another process is never signalled. Each signal sent is
// logged on log (nil discards) with session_id, pid and signal.
func Reap(ctx context.Context, log *slog.Logger, id Identity, tags Tags, l Ladder) Verdict {
	return reapTree(ctx, log, id, nil, tags, l)
}

func reapTree(ctx context.Context, log *slog.Logger, root Identity, known []Identity, tags Tags, l Ladder) Verdict {
	x := newRun(log, nil, root, tags)
	defer x.close()
	for _, id := range known {
		if id.PID > 0 && id.PID != os.Getpid() {
			x.members[id.PID] = id
		}
	}
	if root.PID > 0 && x.r != nil {
		if st, err := x.r.read(root.PID); err == nil && probeOne(x.r, root) == Alive {
			x.q.group, x.q.sid = root.PID, st.SID
		}
	}
	x.rescan()
	if x.rootGone() && len(x.members) == 0 {
		return x.verdict()
	}
	return x.ladder(ctx, l, false)
}
