package ctl

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
)

var topFlags struct {
	interval time.Duration
	once     bool
}

// Bounds of `ctl top --interval`: a shorter one measures CPU over too few
// clock ticks (10 ms each) and reads every live session's journal tail
// and process tree ten times a second; a longer one is not a refreshing view.
const (
	minTopInterval = 100 * time.Millisecond
	maxTopInterval = time.Hour
)

func init() {
	registerCtl(&ctlCommand{
		name: "top", usage: "[--interval D] [--once]", summary: "refreshing table of live sessions and shared runtimes (pid, RSS, PSS, CPU of the provider's process tree, turns, events/s)",
		flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&topFlags.interval, "interval", 2*time.Second,
				fmt.Sprintf("refresh interval, %v to %v; CPU and events/s are measured over it", minTopInterval, maxTopInterval))
			fs.BoolVar(&topFlags.once, "once", false, "print one table (after one interval) and exit")
		},
		run: ctlTop,
	})
}

// Kinds of TopRow.
const (
	TopSession = "session"
	TopRuntime = "runtime"
)

// TopRow is one live session, or one shared runtime, in one frame (also
// the --json shape; rows come in the table's order: a runtime's row, then
// its sessions'). RSS, PSS, CPU, Memory and Procs are the whole process
// tree (treeUsage) of a per-session session or of a runtime; a session on
// a shared runtime has none of its own (they are its runtime's row's).
type TopRow struct {
	Kind         string  `json:"kind"`                // session | runtime
	SessionID    string  `json:"sessionId,omitempty"` // a session's
	RuntimeID    string  `json:"runtimeId,omitempty"` // a runtime's, or the runtime a session runs on
	Sessions     int     `json:"sessions,omitempty"`  // a runtime's: live sessions on it
	TurnsRunning int     `json:"turnsRunning,omitempty"`
	Provider     string  `json:"provider"`
	Title        string  `json:"title"`
	PID          int     `json:"pid"`
	RSS          uint64  `json:"rssBytes"`    // summed over the tree
	PSS          uint64  `json:"pssBytes"`    // summed over the tree (smaps_rollup); 0 where it cannot be read
	Memory       uint64  `json:"memoryBytes"` // the cgroup's memory.current, else RSS summed
	Procs        int     `json:"processes"`   // the tree: the cgroup's members, else root + descendants + tagged
	UsageFrom    string  `json:"usageFrom"`   // cgroup | proc
	CPU          float64 `json:"cpuPercent"`  // of one CPU, over the interval, summed over the tree
	Turns        int     `json:"turns"`       // turn.started events in the journal
	TurnRunning  bool    `json:"turnRunning"`
	EventsPerSec float64 `json:"eventsPerSec"`
	Gone         bool    `json:"gone,omitempty"` // the provider child could not be read
	account      string
	pssOK        bool
	cpu          map[int]float64
	lastSeq      uint64
}

// topState carries what one frame needs from the previous one.
type topState struct {
	at      time.Time
	stateID string // the daemon's, for its processes' env tags
	rows    map[string]TopRow
	turns   map[string]int    // turn.started counted so far, per session
	read    map[string]uint64 // seq counted up to, per session
}

func ctlTop(e *ctlEnv, args []string) int {
	if len(args) != 0 {
		return e.usageErr("top", "takes no arguments")
	}
	if iv := topFlags.interval; iv < minTopInterval || iv > maxTopInterval {
		return e.usageErr("top", fmt.Sprintf("--interval %v is out of range: want %v to %v", iv, minTopInterval, maxTopInterval))
	}
	c, code := e.dial(rpc.ClientOptions{})
	if c == nil {
		return code
	}
	defer c.Close()
	var status rpc.Status
	if err := c.Call(e.ctx, "daemon.status", nil, &status); err != nil {
		return e.fail(err)
	}
	st := &topState{stateID: status.StateID, turns: map[string]int{}, read: map[string]uint64{}}
	prev, err := st.sample(e, c)
	if err != nil {
		return e.fail(err)
	}
	tick := time.NewTicker(topFlags.interval)
	defer tick.Stop()
	clear := !e.json && !topFlags.once && tty.IsTerminal(e.stdout)
	for {
		select {
		case <-e.ctx.Done():
			if s := e.stalled(); s != nil {
				return e.fail(s) // the daemon stopped answering its probe
			}
			return exitcode.OK // Ctrl-C
		case <-tick.C:
		}
		cur, err := st.sample(e, c)
		if err != nil {
			if e.ctx.Err() != nil && e.stalled() == nil {
				return exitcode.OK // Ctrl-C while a frame was being read
			}
			return e.fail(err)
		}
		rows := rates(prev, cur)
		if code := printTop(e, rows, clear); code != exitcode.OK || topFlags.once {
			return code
		}
		prev = cur
	}
}

// sample lists the live sessions and reads each one's process figures and
// new journal events.
func (st *topState) sample(e *ctlEnv, c *rpc.Client) (topState, error) {
	sessions, err := c.ListAll(e.ctx)
	if err != nil {
		return topState{}, err
	}
	var status rpc.Status
	if err := c.Call(e.ctx, "daemon.status", nil, &status); err != nil {
		return topState{}, err
	}
	out := topState{at: time.Now(), rows: map[string]TopRow{}}
	ps := takeProcSnapshot(st.stateID)
	cgroups := map[string]string{} // a runtime's, from a session on it
	for _, s := range sessions {
		if s.PID == 0 || s.State != "live" {
			continue
		}
		if err := st.countTurns(e, c, s.SessionID, s.LastSeq); errors.Is(err, &rpc.Error{Reason: "session_not_found"}) {
			continue // deleted since the list: not in this frame
		} else if err != nil {
			return topState{}, err
		}
		r := TopRow{Kind: TopSession, SessionID: s.SessionID, RuntimeID: s.RuntimeID, Provider: s.Provider, Title: s.Title,
			PID: s.PID, TurnRunning: s.TurnRunning, lastSeq: s.LastSeq, Turns: st.turns[s.SessionID]}
		_, _, r.Gone = procFigures(s.PID)
		if s.RuntimeID != "" {
			cgroups[s.RuntimeID] = s.Cgroup
		} else if u, ok := sessionUsage(s, ps); ok {
			r.RSS, r.cpu, r.Memory, r.Procs, r.UsageFrom = u.RSS, u.cpu, u.Memory, u.Procs, u.Source
			r.PSS, r.pssOK = u.PSS, u.pssOK
		}
		out.rows[s.SessionID] = r
	}
	for _, rt := range status.Runtimes {
		r := TopRow{Kind: TopRuntime, RuntimeID: rt.RuntimeID, Provider: rt.Provider, PID: rt.PID, account: rt.Account}
		for _, s := range out.rows {
			if s.RuntimeID == rt.RuntimeID {
				r.Sessions++
				if s.TurnRunning {
					r.TurnsRunning++
				}
				r.lastSeq += s.lastSeq
			}
		}
		_, _, r.Gone = procFigures(rt.PID)
		if u, ok := runtimeUsage(rt, cgroups[rt.RuntimeID], ps); ok {
			r.RSS, r.cpu, r.Memory, r.Procs, r.UsageFrom = u.RSS, u.cpu, u.Memory, u.Procs, u.Source
			r.PSS, r.pssOK = u.PSS, u.pssOK
		}
		out.rows[rt.RuntimeID] = r
	}
	st.forget(sessions)
	return out, nil
}

// forget drops the counts of sessions no longer listed, so a long-running
// top under churn holds only the sessions that exist.
func (st *topState) forget(listed []api.SessionInfo) {
	keep := make(map[string]bool, len(listed))
	for _, s := range listed {
		keep[s.SessionID] = true
	}
	for id := range st.read {
		if !keep[id] {
			delete(st.read, id)
			delete(st.turns, id)
		}
	}
}

// countTurns reads the events after what was already counted (the whole
// journal the first time) and counts turn.started.
func (st *topState) countTurns(e *ctlEnv, c *rpc.Client, id string, lastSeq uint64) error {
	for st.read[id] < lastSeq {
		var r api.ReadResult
		p := api.ReadParams{SessionID: id, AfterSeq: st.read[id], Limit: api.MaxPageEvents}
		if err := c.Call(e.ctx, "agentSession.read", p, &r); err != nil {
			return err
		}
		for _, ev := range r.Events {
			if ev.Type == event.TurnStarted {
				st.turns[id]++
			}
			st.read[id] = ev.Seq
		}
		if !r.HasMore || len(r.Events) == 0 {
			break
		}
	}
	return nil
}

// rates turns two samples into rows: CPU and events/s over the interval.
func rates(prev, cur topState) []TopRow {
	dt := cur.at.Sub(prev.at).Seconds()
	var rows []TopRow
	for id, r := range cur.rows {
		if p, ok := prev.rows[id]; ok && dt > 0 && p.PID == r.PID && !p.Gone && !r.Gone {
			r.CPU = 100 * cpuGrowth(p.cpu, r.cpu) / dt
			if r.lastSeq >= p.lastSeq { // a runtime's sum drops when a session leaves it
				r.EventsPerSec = float64(r.lastSeq-p.lastSeq) / dt
			}
		}
		rows = append(rows, r)
	}
	sortTopRows(rows)
	return rows
}

func printTop(e *ctlEnv, rows []TopRow, clear bool) int {
	if e.json {
		if rows == nil {
			rows = []TopRow{}
		}
		if err := json.NewEncoder(e.stdout).Encode(rows); err != nil {
			return e.fail(err)
		}
		return exitcode.OK
	}
	if clear {
		fmt.Fprint(e.stdout, "\x1b[H\x1b[2J")
	}
	writeTopTable(e.stdout, rows)
	if !clear && !topFlags.once {
		fmt.Fprintln(e.stdout)
	}
	return exitcode.OK
}

// TopHeading says what the figures are, above the table.
const TopHeading = "RSS, PSS, CPU% and MEM are summed over each session's PROCS processes: " +
	"its cgroup (cgroup mode), else the provider, its descendants and the processes tagged with the session; " +
	"sessions on a shared runtime are listed under its row, which has their figures\n"

func writeTopTable(w io.Writer, rows []TopRow) {
	var t table
	t.add("ID", "PROVIDER", "PID", "PROCS", "RSS", "PSS", "MEM", "CPU%", "TURNS", "TURN", "EVENTS/S", "TITLE")
	for _, r := range rows {
		rss, pss, cpu, mem, procs := "-", "-", "-", bytesText(r.Memory), fmt.Sprint(r.Procs)
		if !r.Gone {
			rss, cpu = bytesText(r.RSS), fmt.Sprintf("%.1f", r.CPU)
			if r.pssOK {
				pss = bytesText(r.PSS)
			}
		}
		id, turns, turn, title := tty.Safe(r.SessionID), fmt.Sprint(r.Turns), "-", dash(fit(r.Title, titleCells))
		if r.TurnRunning {
			turn = "running"
		}
		switch {
		case r.Kind == TopRuntime:
			id, turns = tty.Safe(r.RuntimeID), "-"
			if r.TurnsRunning > 0 {
				turn = fmt.Sprintf("%d running", r.TurnsRunning)
			}
			title = fmt.Sprintf("runtime: %d sessions, account %s", r.Sessions, fit(r.account, providerCells))
		case r.RuntimeID != "": // its figures are its runtime's
			id, rss, pss, cpu, mem, procs = "  "+id, "-", "-", "-", "-", "-"
		}
		t.add(id, fit(r.Provider, providerCells), fmt.Sprint(r.PID), procs, rss, pss,
			mem, cpu, turns, turn, fmt.Sprintf("%.1f", r.EventsPerSec), title)
	}
	io.WriteString(w, TopHeading)
	t.write(w)
}

// bytesText is a size as "812K", "84.1M", "1.2G".
func bytesText(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%dK", n>>10)
	}
}

// sortTopRows orders rows by CPU, then id, so the busiest come first; a
// session on a shared runtime follows its runtime's row (its sessions by
// id), and one whose runtime has no row (it left since the list) comes
// last.
func sortTopRows(rows []TopRow) {
	key := func(r TopRow) string {
		if r.Kind == TopRuntime {
			return r.RuntimeID
		}
		return r.SessionID
	}
	var top []TopRow
	under := map[string][]TopRow{}
	for _, r := range rows {
		if r.Kind == TopSession && r.RuntimeID != "" {
			under[r.RuntimeID] = append(under[r.RuntimeID], r)
		} else {
			top = append(top, r)
		}
	}
	sort.Slice(top, func(i, k int) bool {
		if top[i].CPU != top[k].CPU {
			return top[i].CPU > top[k].CPU
		}
		return key(top[i]) < key(top[k])
	})
	out := rows[:0:0]
	for _, r := range top {
		out = append(out, r)
		if r.Kind == TopRuntime {
			s := under[r.RuntimeID]
			sort.Slice(s, func(i, k int) bool { return s[i].SessionID < s[k].SessionID })
			out = append(out, s...)
			delete(under, r.RuntimeID)
		}
	}
	var orphans []TopRow
	for _, s := range under {
		orphans = append(orphans, s...)
	}
	sort.Slice(orphans, func(i, k int) bool { return orphans[i].SessionID < orphans[k].SessionID })
	copy(rows, append(out, orphans...))
}
