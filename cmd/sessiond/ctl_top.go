package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
)

var topFlags struct {
	interval time.Duration
	once     bool
}

func init() {
	registerCtl(&ctlCommand{
		name: "top", usage: "[--interval D] [--once]", summary: "refreshing table of live sessions (pid, RSS, CPU, turns, events/s)",
		flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&topFlags.interval, "interval", 2*time.Second, "refresh interval; CPU and events/s are measured over it")
			fs.BoolVar(&topFlags.once, "once", false, "print one table (after one interval) and exit")
		},
		run: ctlTop,
	})
}

// topRow is one live session in one frame (also the --json shape).
type topRow struct {
	SessionID    string  `json:"sessionId"`
	Provider     string  `json:"provider"`
	Title        string  `json:"title"`
	PID          int     `json:"pid"`
	RSS          uint64  `json:"rssBytes"`
	Memory       uint64  `json:"memoryBytes"` // the whole tree: the cgroup's memory.current, else RSS summed
	Procs        int     `json:"processes"`   // the whole tree: the cgroup's members, else root + descendants
	UsageFrom    string  `json:"usageFrom"`   // cgroup | proc
	CPU          float64 `json:"cpuPercent"`  // of one CPU, over the interval
	Turns        int     `json:"turns"`       // turn.started events in the journal
	TurnRunning  bool    `json:"turnRunning"`
	EventsPerSec float64 `json:"eventsPerSec"`
	Gone         bool    `json:"gone,omitempty"` // the process could not be read
	cpuTime      float64 // user+system seconds
	lastSeq      uint64
}

// topState carries what one frame needs from the previous one.
type topState struct {
	at    time.Time
	rows  map[string]topRow
	turns map[string]int    // turn.started counted so far, per session
	read  map[string]uint64 // seq counted up to, per session
}

func ctlTop(e *ctlEnv, args []string) int {
	if len(args) != 0 {
		return e.usageErr("top", "takes no arguments")
	}
	if topFlags.interval < 10*time.Millisecond {
		return e.usageErr("top", fmt.Sprintf("--interval %v: want at least 10ms", topFlags.interval))
	}
	c, code := e.dial(rpc.ClientOptions{})
	if c == nil {
		return code
	}
	defer c.Close()
	st := &topState{turns: map[string]int{}, read: map[string]uint64{}}
	prev, err := st.sample(e, c)
	if err != nil {
		return e.fail(err)
	}
	tick := time.NewTicker(topFlags.interval)
	defer tick.Stop()
	clear := !e.json && !topFlags.once && isTerminal(e.stdout)
	for {
		select {
		case <-e.ctx.Done():
			return exitOK
		case <-tick.C:
		}
		cur, err := st.sample(e, c)
		if err != nil {
			return e.fail(err)
		}
		rows := rates(prev, cur)
		if code := printTop(e, rows, clear); code != exitOK || topFlags.once {
			return code
		}
		prev = cur
	}
}

// sample lists the live sessions and reads each one's process figures and
// new journal events.
func (st *topState) sample(e *ctlEnv, c *rpc.Client) (topState, error) {
	var list api.ListResult
	if err := c.Call(e.ctx, "agentSession.list", nil, &list); err != nil {
		return topState{}, err
	}
	out := topState{at: time.Now(), rows: map[string]topRow{}}
	for _, s := range list.Sessions {
		if s.PID == 0 || s.State != "live" {
			continue
		}
		if err := st.countTurns(e, c, s.SessionID, s.LastSeq); err != nil {
			return topState{}, err
		}
		r := topRow{SessionID: s.SessionID, Provider: s.Provider, Title: s.Title, PID: s.PID, TurnRunning: s.TurnRunning,
			lastSeq: s.LastSeq, Turns: st.turns[s.SessionID]}
		r.RSS, r.cpuTime, r.Gone = procFigures(s.PID)
		if u, ok := sessionUsage(s); ok {
			r.Memory, r.Procs, r.UsageFrom = u.Memory, u.Procs, u.Source
		}
		out.rows[s.SessionID] = r
	}
	return out, nil
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

// procFigures is a process's RSS and CPU seconds through gopsutil; gone
// when it cannot be read (it exited between list and read).
func procFigures(pid int) (rss uint64, cpuSec float64, gone bool) {
	p, err := process.NewProcess(int32(pid))
	if err != nil {
		return 0, 0, true
	}
	mem, err := p.MemoryInfo()
	if err != nil {
		return 0, 0, true
	}
	t, err := p.Times()
	if err != nil {
		return 0, 0, true
	}
	return mem.RSS, t.User + t.System, false
}

// rates turns two samples into rows: CPU and events/s over the interval.
func rates(prev, cur topState) []topRow {
	dt := cur.at.Sub(prev.at).Seconds()
	var rows []topRow
	for id, r := range cur.rows {
		if p, ok := prev.rows[id]; ok && dt > 0 && p.PID == r.PID && !p.Gone && !r.Gone {
			r.CPU = 100 * (r.cpuTime - p.cpuTime) / dt
			r.EventsPerSec = float64(r.lastSeq-p.lastSeq) / dt
		}
		rows = append(rows, r)
	}
	sortTopRows(rows)
	return rows
}

func printTop(e *ctlEnv, rows []topRow, clear bool) int {
	if e.json {
		if rows == nil {
			rows = []topRow{}
		}
		if err := json.NewEncoder(e.stdout).Encode(rows); err != nil {
			return e.fail(err)
		}
		return exitOK
	}
	if clear {
		fmt.Fprint(e.stdout, "\x1b[H\x1b[2J")
	}
	writeTopTable(e.stdout, rows)
	if !clear && !topFlags.once {
		fmt.Fprintln(e.stdout)
	}
	return exitOK
}

func writeTopTable(w io.Writer, rows []topRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPROVIDER\tPID\tRSS\tMEM\tPROCS\tCPU%\tTURNS\tTURN\tEVENTS/S\tTITLE")
	for _, r := range rows {
		rss, cpu := "-", "-"
		if !r.Gone {
			rss, cpu = bytesText(r.RSS), fmt.Sprintf("%.1f", r.CPU)
		}
		turn := "-"
		if r.TurnRunning {
			turn = "running"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%d\t%s\t%.1f\t%s\n", termSafe(r.SessionID), termSafe(r.Provider), r.PID, rss,
			bytesText(r.Memory), r.Procs, cpu,
			r.Turns, turn, r.EventsPerSec, dash(termSafe(r.Title)))
	}
	tw.Flush()
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

// sortTopRows orders rows by CPU, then id, so the busiest come first.
func sortTopRows(rows []topRow) {
	sort.Slice(rows, func(i, k int) bool {
		if rows[i].CPU != rows[k].CPU {
			return rows[i].CPU > rows[k].CPU
		}
		return rows[i].SessionID < rows[k].SessionID
	})
}
