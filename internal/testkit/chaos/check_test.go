package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
)

// readAll pages a session's whole journal.
func readAll(t *testing.T, c *rpc.Client, id string) ([]event.Event, error) {
	var all []event.Event
	after := uint64(0)
	for {
		var r api.ReadResult
		if err := c.Call(ctxT(t), "agentSession.read", api.ReadParams{SessionID: id, AfterSeq: after, Limit: 4096}, &r); err != nil {
			return all, err
		}
		all = append(all, r.Events...)
		if len(r.Events) > 0 {
			after = r.Events[len(r.Events)-1].Seq
		}
		if !r.HasMore || len(r.Events) == 0 {
			return all, nil
		}
	}
}

// checkRestarted checks a freshly restarted daemon before any hold: no
// session live, every lease released, journals gapless with no open turn,
// every event a client saw still in the journal, identical, and every
// completed turn's deltas adding up to its message. It returns how many
// seen events and completed turns it compared.
func checkRestarted(t *testing.T, c *rpc.Client, rec *recorder, ids []string) (int, int, []string) {
	var vs []string
	sessions := listSessions(t, c)
	checked, turns := 0, 0
	for _, id := range ids {
		s, ok := sessions[id]
		if !ok {
			vs = append(vs, fmt.Sprintf("session %s created by a client is missing after restart", id))
			continue
		}
		if s.Lease != "released" || s.PID != 0 || s.State != "stored" || s.TurnRunning {
			vs = append(vs, fmt.Sprintf("session %s right after restart: state %s lease %s pid %d turnRunning %v",
				id, s.State, s.Lease, s.PID, s.TurnRunning))
		}
		evs, err := readAll(t, c, id)
		if err != nil {
			vs = append(vs, fmt.Sprintf("session %s: read journal: %v", id, err))
			continue
		}
		bySeq := map[uint64]event.Event{}
		open := map[string]bool{}
		for i, ev := range evs {
			if ev.Seq != uint64(i+1) {
				vs = append(vs, fmt.Sprintf("session %s: seq gap: event %d has seq %d", id, i+1, ev.Seq))
				break
			}
			bySeq[ev.Seq] = ev
			switch ev.Type {
			case event.TurnStarted:
				open[ev.TurnID] = true
			case event.TurnCompleted:
				delete(open, ev.TurnID)
			}
		}
		n, lost := checkDeltas(id, evs)
		turns += n
		vs = append(vs, lost...)
		if len(open) != 0 {
			vs = append(vs, fmt.Sprintf("session %s: journal ends with open turns %v and no child", id, keys(open)))
		}
		if n := len(evs); n > 0 && evs[n-1].Type != event.LeaseReleased && evs[n-1].Type != event.SessionCreated {
			vs = append(vs, fmt.Sprintf("session %s: journal of a stored session ends with %s", id, describe(evs[n-1])))
		}
		for seq, seen := range rec.snapshot(id) {
			checked++
			got, ok := bySeq[seq]
			if !ok {
				vs = append(vs, fmt.Sprintf("session %s: event seen by a client is lost: %s", id, describe(seen)))
			} else if !sameEvent(got, seen) {
				vs = append(vs, fmt.Sprintf("session %s: event changed: seen %s, journal %s", id, describe(seen), describe(got)))
			}
		}
	}
	return checked, turns, vs
}

// checkDeltas sees loss that seq numbers cannot: for every turn that
// completed, the message deltas journaled for it concatenate to exactly
// its message.completed text (a batch that failed to commit could drop
// deltas while seq stayed gapless).
func checkDeltas(id string, evs []event.Event) (int, []string) {
	var vs []string
	deltas := map[string]*bytes.Buffer{}
	completedText := map[string]string{}
	checked := 0
	for _, ev := range evs {
		var d struct {
			Text   string `json:"text"`
			Status string `json:"status"`
		}
		switch ev.Type {
		case event.MessageDelta, event.MessageCompleted, event.TurnCompleted:
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				vs = append(vs, fmt.Sprintf("session %s: %s: bad data: %v", id, describe(ev), err))
				continue
			}
		}
		switch ev.Type {
		case event.MessageDelta:
			if deltas[ev.TurnID] == nil {
				deltas[ev.TurnID] = &bytes.Buffer{}
			}
			deltas[ev.TurnID].WriteString(d.Text)
		case event.MessageCompleted:
			completedText[ev.TurnID] = d.Text
		case event.TurnCompleted:
			if d.Status != "completed" {
				continue
			}
			checked++
			want, ok := completedText[ev.TurnID]
			got := ""
			if deltas[ev.TurnID] != nil {
				got = deltas[ev.TurnID].String()
			}
			switch {
			case !ok:
				vs = append(vs, fmt.Sprintf("session %s turn %s completed with no message.completed", id, ev.TurnID))
			case got != want:
				vs = append(vs, fmt.Sprintf("session %s turn %s: deltas hold %d bytes, message.completed %d: deltas lost",
					id, ev.TurnID, len(got), len(want)))
			}
		}
	}
	return checked, vs
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkOwned: every tagged process belongs to a live session of this
// daemon: its session and fence tags name a live session (a descendant
// inherits them), or it descends from a live session's child.
func checkOwned(sessions map[string]api.SessionInfo, pids []int) []string {
	var vs []string
	livePID := map[int]bool{}
	for _, s := range sessions {
		if s.PID != 0 {
			livePID[s.PID] = true
		}
	}
	for _, pid := range pids {
		sid, fence := tagsOf(pid)
		if s, ok := sessions[sid]; ok && s.State == "live" && s.Lease == "live" && s.Fence == fence {
			continue
		}
		if descendsFrom(pid, livePID) {
			continue
		}
		vs = append(vs, fmt.Sprintf("tagged process %d (session %s fence %d) is owned by no live session", pid, sid, fence))
	}
	return vs
}

func tagsOf(pid int) (string, uint64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", 0
	}
	var sid string
	var fence uint64
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("SESSIOND_SESSION_ID=")); ok {
			sid = string(v)
		}
		if v, ok := bytes.CutPrefix(kv, []byte("SESSIOND_FENCE=")); ok {
			fence, _ = strconv.ParseUint(string(v), 10, 64)
		}
	}
	return sid, fence
}

func descendsFrom(pid int, roots map[int]bool) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		if roots[pid] {
			return true
		}
		pid = ppidOf(pid)
	}
	return false
}

func ppidOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(string(f[1]))
	return p
}
