package ctl

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
	"github.com/sessiond/sessiond/internal/version"
)

func init() {
	registerCtl(&ctlCommand{name: "doctor", usage: "[--state-dir DIR]",
		summary: "check for orphans, stale leases and open turns (exit 1: problems, 3: could not check)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&doctorStateDir, "state-dir", "", "state directory to inspect when no daemon runs (default as for serve)")
		},
		run: ctlDoctor})
}

// doctorStateDir is --state-dir of ctl doctor (read when no daemon runs).
var doctorStateDir string

// DoctorProblem is one finding with the one-line fix an operator runs.
type DoctorProblem struct {
	What string `json:"what"`
	Fix  string `json:"fix"`
}

// DoctorCheck is one line of the report.
type DoctorCheck struct {
	Name     string          `json:"name"`
	OK       bool            `json:"ok"`
	Detail   string          `json:"detail,omitempty"`
	Unknown  bool            `json:"unknown,omitempty"` // could not check
	Problems []DoctorProblem `json:"problems,omitempty"`
}

// DoctorReport is the whole report (--json prints it as is).
type DoctorReport struct {
	Daemon   bool          `json:"daemon"` // a daemon answered on the socket
	Socket   string        `json:"socket"`
	StateDir string        `json:"stateDir"`
	StateID  string        `json:"stateId,omitempty"`
	Checks   []DoctorCheck `json:"checks"`
	Problems int           `json:"problems"`
}

func (r *DoctorReport) add(c DoctorCheck) {
	c.OK = len(c.Problems) == 0 && !c.Unknown
	r.Checks = append(r.Checks, c)
	r.Problems += len(c.Problems)
}

func ctlDoctor(e *ctlEnv, args []string) int {
	if len(args) != 0 {
		return e.usageErr("doctor", "takes no arguments")
	}
	rep := &DoctorReport{Socket: e.socket}
	c, err := e.dialTimed(rpc.ClientOptions{Name: "sessiond-ctl-doctor", Version: version.String()})
	switch {
	case err == nil:
		defer c.Close()
		e.watch(c)
		rep.Daemon = true
		if code := doctorOnline(e, c, rep); code != exitcode.OK {
			return code
		}
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED):
		doctorOffline(e, rep)
	default:
		fmt.Fprintf(e.stderr, "sessiond ctl doctor: cannot reach the daemon on %s: %s\n", tty.Safe(e.socket), tty.Safe(err.Error()))
		return exitcode.NoDaemon
	}
	return doctorPrint(e, rep)
}

// doctorOnline asks the running daemon for its sessions and compares them
// with the processes carrying its state id.
func doctorOnline(e *ctlEnv, c *rpc.Client, rep *DoctorReport) int {
	var st rpc.Status
	if err := c.Call(e.ctx, "daemon.status", nil, &st); err != nil {
		return e.fail(err)
	}
	rep.StateDir, rep.StateID = st.StateDir, st.StateID
	sessions, err := c.ListAll(e.ctx)
	if err != nil {
		return e.fail(err)
	}
	rep.add(DoctorCheck{Name: "daemon", Detail: fmt.Sprintf("pid %d, version %s, %d sessions (%d live)",
		st.PID, st.Version, st.Sessions.Stored, st.Sessions.Live)})
	rep.add(DoctorCheck{Name: "schema", Detail: "checked by the running daemon (it refuses a newer schema)"})
	rep.add(doctorSupervision(st.Supervision))
	rep.add(doctorKeepAwake(st.Attention))

	leases := DoctorCheck{Name: "leases"}
	turns := DoctorCheck{Name: "open-turns"}
	live := map[string]api.SessionInfo{}
	for _, s := range sessions {
		if s.State == "live" && s.PID > 0 {
			live[s.SessionID] = s
		}
		if s.Lease == "live" && (s.PID == 0 || !pidExists(s.PID)) && s.State != "starting" && s.State != "evicting" {
			leases.Problems = append(leases.Problems, DoctorProblem{
				What: fmt.Sprintf("session %s: lease live at fence %d but its owner pid %d is not running", s.SessionID, s.Fence, s.PID),
				Fix:  selfCtl() + " close " + s.SessionID})
		}
		if s.Lease == "reserved" && s.State == "stored" {
			leases.Problems = append(leases.Problems, DoctorProblem{
				What: fmt.Sprintf("session %s: lease reserved at fence %d and no start in progress", s.SessionID, s.Fence),
				Fix:  selfCtl() + " shutdown, then " + selfServe() + ": startup reaps and releases"})
		}
		if s.TurnRunning && s.PID == 0 {
			turns.Problems = append(turns.Problems, DoctorProblem{
				What: fmt.Sprintf("session %s: a turn is open and no provider child runs", s.SessionID),
				Fix:  selfCtl() + " shutdown, then " + selfServe() + ": startup closes it"})
		}
	}
	leases.Detail = fmt.Sprintf("%d sessions, %d live", len(sessions), len(live))
	rep.add(leases)
	rep.add(turns)
	var stats struct {
		StaleRuntimeRecords []staleRuntimeRecord `json:"staleRuntimeRecords"`
		Journal             struct {
			LostBySession    map[string]uint64
			Unavailable      string
			UnavailableSince time.Time
			Held             int
		} `json:"journal"`
	}
	if err := c.Call(e.ctx, "daemon.stats", nil, &stats); err != nil {
		rep.add(DoctorCheck{Name: checkJournalLoss, Unknown: true, Detail: "daemon.stats: " + err.Error()})
		rep.add(DoctorCheck{Name: checkStoreWritable, Unknown: true, Detail: "daemon.stats: " + err.Error()})
		rep.add(DoctorCheck{Name: CheckRuntimeRecords, Unknown: true, Detail: "daemon.stats: " + err.Error()})
	} else {
		rep.add(doctorStaleRuntimes(stats.StaleRuntimeRecords))
		rep.add(doctorLosses(stats.Journal.LostBySession))
		js := stats.Journal
		rep.add(doctorWritable(st.StateDir, js.Unavailable, js.UnavailableSince, js.Held))
	}
	for _, rt := range st.Runtimes { // a runtime no session is on yet (its release clock runs) is live too
		live["runtime "+rt.RuntimeID] = api.SessionInfo{PID: rt.PID, RuntimeID: rt.RuntimeID}
	}
	rep.add(doctorTagged(st.StateID, func(t proc.Tagged) bool { return ownedByLive(t, live) },
		func(t proc.Tagged) string {
			if t.RuntimeID != "" {
				return fmt.Sprintf("kill %d", t.PID)
			}
			return fmt.Sprintf("kill %d   # or: %s close %s", t.PID, selfCtl(), t.SessionID)
		}))
	return exitcode.OK
}

// ownedByLive: a tagged process belongs to a live session when it is its
// child, descends from it, carries its session id and fence, or carries
// the id of the shared runtime it runs on.
func ownedByLive(t proc.Tagged, live map[string]api.SessionInfo) bool {
	if s, ok := live[t.SessionID]; ok && t.SessionID != "" && (t.Fence == s.Fence || t.Fence == 0) {
		return true
	}
	roots := map[int]bool{}
	for _, s := range live {
		roots[s.PID] = true
		if t.RuntimeID != "" && s.RuntimeID == t.RuntimeID {
			return true
		}
	}
	pid := t.PID
	for range 64 {
		if roots[pid] {
			return true
		}
		if pid = ppidOf(pid); pid <= 1 {
			return false
		}
	}
	return false
}

// doctorTagged lists processes tagged with stateID that owned rejects.
func doctorTagged(stateID string, owned func(proc.Tagged) bool, fix func(proc.Tagged) string) DoctorCheck {
	c := DoctorCheck{Name: "tagged-processes"}
	if stateID == "" {
		c.Unknown, c.Detail = true, "no state id: nothing to match processes against"
		return c
	}
	tagged, err := proc.ScanTagged(stateID)
	if err != nil {
		c.Unknown, c.Detail = true, "cannot enumerate processes: "+err.Error()
		return c
	}
	for _, t := range tagged {
		if owned(t) {
			continue
		}
		what := fmt.Sprintf("pid %d carries session %s (fence %d) of state %s and no live session owns it", t.PID, t.SessionID, t.Fence, stateID)
		if t.RuntimeID != "" {
			what = fmt.Sprintf("pid %d carries runtime %s of state %s and no live session runs on it", t.PID, t.RuntimeID, stateID)
		}
		c.Problems = append(c.Problems, DoctorProblem{What: what, Fix: fix(t)})
	}
	c.Detail = fmt.Sprintf("%d tagged, %d unowned", len(tagged), len(c.Problems))
	return c
}

func pidExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func ppidOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// doctorPrint prints the report; exit 1 on a problem, 3 when a check could
// not run and nothing else was wrong, else 0.
func doctorPrint(e *ctlEnv, rep *DoctorReport) int {
	unknown := false
	for _, c := range rep.Checks {
		unknown = unknown || c.Unknown
	}
	if e.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		mode := "daemon running on " + rep.Socket
		if !rep.Daemon {
			mode = "no daemon on " + rep.Socket + "; read the store"
		}
		fmt.Fprintf(e.stdout, "sessiond doctor: %s (state dir %s, id %s)\n", tty.Safe(mode), tty.Safe(rep.StateDir), dash(tty.Safe(rep.StateID)))
		for _, c := range rep.Checks {
			switch {
			case c.Unknown:
				fmt.Fprintf(e.stdout, "UNKNOWN  %s: %s\n", tty.Safe(c.Name), tty.Safe(c.Detail))
			case c.OK:
				fmt.Fprintf(e.stdout, "ok       %s: %s\n", tty.Safe(c.Name), dash(tty.Safe(c.Detail)))
			}
			for _, p := range c.Problems {
				fmt.Fprintf(e.stdout, "PROBLEM  %s: %s\n         fix: %s\n", tty.Safe(c.Name), tty.Safe(p.What), tty.Safe(p.Fix))
			}
		}
		fmt.Fprintf(e.stdout, "%d problem(s)\n", rep.Problems)
	}
	switch {
	case rep.Problems > 0:
		return exitcode.Error
	case unknown:
		return exitcode.NoDaemon
	}
	return exitcode.OK
}

const (
	checkJournalLoss   = "journal-loss"
	checkStoreWritable = "store-writable"
)

// doctorWritable reports a running daemon whose store refuses writes
// (disk full, an I/O error): its calls answer store_unavailable.
func doctorWritable(stateDir, cause string, since time.Time, held int) DoctorCheck {
	c := DoctorCheck{Name: checkStoreWritable, Detail: "the daemon's store takes writes"}
	if cause == "" {
		return c
	}
	c.Detail = "the daemon's store refuses writes"
	c.Problems = []DoctorProblem{{
		What: fmt.Sprintf("the store refuses writes since %s (%d provider rows held in memory): %s",
			since.UTC().Format(time.RFC3339), held, cause),
		Fix: fmt.Sprintf("free space on the filesystem of %s (df -h %s): the held rows are written, and calls work again, as soon as it takes writes",
			stateDir, stateDir)}}
	return c
}

// doctorLosses reports every session whose journal records lost events
// (journal.loss rows): its history has a hole nothing can fill.
func doctorLosses(lost map[string]uint64) DoctorCheck {
	c := DoctorCheck{Name: checkJournalLoss}
	ids := make([]string, 0, len(lost))
	for id := range lost {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c.Problems = append(c.Problems, DoctorProblem{
			What: fmt.Sprintf("session %s: %d events could not be stored (journal.loss rows; the turn open then was failed)", id, lost[id]),
			Fix:  fmt.Sprintf("nothing restores them: read `%[1]s attach %[2]s`, then `%[1]s delete %[2]s` once its history is no longer needed", selfCtl(), id)})
	}
	c.Detail = fmt.Sprintf("%d sessions with lost events", len(ids))
	return c
}
