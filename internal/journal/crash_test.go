package journal

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	"github.com/sessiond/sessiond/internal/sysx"
	bolt "go.etcd.io/bbolt"
)

const (
	helperEnv     = "SESSIOND_JOURNAL_CRASH_HELPER" // the state dir the helper writes to
	iterationsEnv = "SESSIOND_CRASH_ITERATIONS"
	tagEnv        = "SESSIOND_SESSION_ID"
	crashSessions = 3
)

// crashHelper is the child of TestCrashSafety: it appends through sinks and
// Journal.Append until killed, printing every event after Commit/Append
// returned it ("C") or a subscriber received it ("P").
func crashHelper() int {
	go func() { // parent-death pipe: stdin EOF means the test is gone
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(2)
	}()
	st, err := store.Open(os.Getenv(helperEnv), 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	j, err := Open(st.DB, Options{CoalesceWindow: time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var outMu sync.Mutex
	report := func(tag string, ev event.Event) {
		line := fmt.Sprintf("%s %s %d %s %s\n", tag, ev.SessionID, ev.Seq, ev.Type, ev.Data)
		outMu.Lock()
		_, _ = os.Stdout.WriteString(line) // one write: a kill never splits a line
		outMu.Unlock()
	}
	ctx := context.Background()
	for s := range crashSessions {
		id := fmt.Sprintf("sess-crash-%d", s)
		_, _, _, sub, err := j.Subscribe(id, j.State(id).LastSeq, 1)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() {
			for {
				ev, err := sub.Next(ctx)
				if err != nil {
					return
				}
				report("P", ev)
			}
		}()
		go func() {
			sink := j.Sink(id)
			for n := 0; ; n++ {
				turn := fmt.Sprintf("t%d-%d", os.Getpid(), n)
				evs, err := sink.Commit(ctx, event.New(event.TurnStarted, turn, event.TurnStartedData{TurnID: turn, Text: "go"}))
				if err != nil {
					return
				}
				report("C", evs[0])
				for k := range 1 + n%7 {
					sink.Append(delta(turn, fmt.Sprintf("d%d.", k)))
				}
				evs, err = sink.Commit(ctx, event.New(event.TurnCompleted, turn, event.TurnCompletedData{Status: event.StatusCompleted}))
				if err != nil {
					return
				}
				report("C", evs[0])
			}
		}()
	}
	for n := 0; ; n++ { // a session without a sink
		evs, err := j.Append(ctx, "sess-crash-plain", event.New(event.SessionCreated, "", map[string]int{"n": n}))
		if err != nil {
			return 1
		}
		report("C", evs[0])
	}
}

type reported struct {
	tag, id, typ, data string
	seq                uint64
}

func parseReport(line string) (reported, bool) {
	f := strings.SplitN(line, " ", 5)
	if len(f) != 5 {
		return reported{}, false
	}
	seq, err := strconv.ParseUint(f[2], 10, 64)
	return reported{tag: f[0], id: f[1], seq: seq, typ: f[3], data: f[4]}, err == nil
}

// TestCrashSafety kills a writing child with SIGKILL at random moments and
// proves after each kill that the file opens cleanly, every reported event
// is in it unchanged, and every session's seqs are gapless.
func TestCrashSafety(t *testing.T) {
	iterations := 30
	if v, err := strconv.Atoi(os.Getenv(iterationsEnv)); err == nil && v > 0 {
		iterations = v
	}
	if testing.Short() {
		iterations = 5
	}
	dir := t.TempDir()
	tag := fmt.Sprintf("journal-crash-%d-%d", os.Getpid(), time.Now().UnixNano())
	defer checkNoTaggedProcess(t, tag)
	totalReported := 0
	for it := range iterations {
		lines := runAndKill(t, dir, tag, rand.IntN(400))
		totalReported += len(lines)
		verifyAfterCrash(t, dir, it, lines)
	}
	t.Logf("%d iterations, %d reported events verified", iterations, totalReported)
}

// runAndKill starts the helper, kills it after `after` reported lines, and
// returns every complete line it wrote.
func runAndKill(t *testing.T, dir, tag string, after int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir, tagEnv+"="+tag)
	sysx.Tie(cmd, syscall.SIGKILL)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for len(lines) < after && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	_ = cmd.Process.Kill()
	for sc.Scan() { // what it wrote before the kill landed
		lines = append(lines, sc.Text())
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("helper ended by itself (%v): %s", err, stderr.String())
	}
	return lines
}

func verifyAfterCrash(t *testing.T, dir string, it int, lines []string) {
	t.Helper()
	st, err := store.Open(dir, 5*time.Second)
	if err != nil {
		t.Fatalf("iteration %d: reopen: %v", it, err)
	}
	defer st.Close()
	if err := st.DB.View(checkTx); err != nil {
		t.Fatalf("iteration %d: bbolt consistency: %v", it, err)
	}
	j, err := Open(st.DB, Options{})
	if err != nil {
		t.Fatalf("iteration %d: journal open: %v", it, err)
	}
	defer j.Close()
	for _, l := range lines {
		r, ok := parseReport(l)
		if !ok {
			t.Fatalf("iteration %d: bad report line %q", it, l)
		}
		evs, _, _, err := j.Read(r.id, r.seq-1, 1)
		if err != nil || len(evs) != 1 || evs[0].Seq != r.seq || evs[0].Type != r.typ || string(evs[0].Data) != r.data {
			t.Fatalf("iteration %d: reported %q but the file has %+v (%v)", it, l, evs, err)
		}
	}
	for _, id := range j.Sessions() {
		s := j.State(id)
		var next = s.OldestSeq
		for after := s.OldestSeq - 1; after < s.LastSeq; {
			evs, _, _, err := j.Read(id, after, MaxReadLimit)
			if err != nil || len(evs) == 0 {
				t.Fatalf("iteration %d: %s read after %d: %v", it, id, after, err)
			}
			for _, e := range evs {
				if e.Seq != next {
					t.Fatalf("iteration %d: %s: seq %d where %d was due", it, id, e.Seq, next)
				}
				var v any
				if json.Unmarshal(e.Data, &v) != nil && len(e.Data) > 0 {
					t.Fatalf("iteration %d: %s seq %d: data %q", it, id, e.Seq, e.Data)
				}
				next++
			}
			after = evs[len(evs)-1].Seq
		}
		if s.OpenTurn != "" && j.State(id).OpenTurnSeq == 0 {
			t.Fatalf("iteration %d: %s: open turn without its seq", it, id)
		}
	}
}

// checkNoTaggedProcess fails if a process carrying our test-unique tag runs.
func checkNoTaggedProcess(t *testing.T, tag string) {
	t.Helper()
	envs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range envs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if kv == tagEnv+"="+tag {
				t.Errorf("a helper outlived the test: %s", p)
			}
		}
	}
}

// checkTx runs bbolt's own consistency check.
func checkTx(tx *bolt.Tx) error {
	var first error
	for err := range tx.Check() { // drain: the checker goroutine sends them all
		if first == nil {
			first = err
		}
	}
	return first
}
