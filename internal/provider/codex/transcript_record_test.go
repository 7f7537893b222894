//go:build record

// The transcript re-recorder: compiled only with the record tag, run as
// go test -tags record -run TestRecordTranscripts ./internal/provider/codex/
package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

// taper records what passes between an adapter and a real echo provider.
type taper struct {
	mu      sync.Mutex
	steps   []step
	partial []byte
}

func (tp *taper) add(s step) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.steps = append(tp.steps, s)
}

func (tp *taper) lines(op string, b []byte) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.partial = append(tp.partial, b...)
	for {
		i := bytes.IndexByte(tp.partial, '\n')
		if i < 0 {
			return
		}
		line := append([]byte(nil), tp.partial[:i]...)
		tp.partial = tp.partial[i+1:]
		if json.Valid(line) {
			tp.steps = append(tp.steps, step{Op: op, Msg: line})
		} else {
			raw := string(line)
			tp.steps = append(tp.steps, step{Op: op, Raw: &raw})
		}
	}
}

type tapWriter struct {
	io.WriteCloser
	tp *taper
}

func (w tapWriter) Write(p []byte) (int, error) { w.tp.lines("c2s", p); return w.WriteCloser.Write(p) }

type tapReader struct {
	io.ReadCloser
	tp *taper
}

func (r tapReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.tp.lines("s2c", p[:n])
	return n, err
}

// TestRecordTranscripts re-records the echo transcripts.
func TestRecordTranscripts(t *testing.T) {
	for name, sc := range recordScenarios {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			threadID := sc.prepare(t, home)
			p := startEcho(t, home)
			tp := &taper{}
			tp.add(step{Op: "options", ThreadID: threadID, Cwd: "/work/project"})
			rec := newRecorder()
			a := NewAdapter(Options{In: tapWriter{p.in, tp}, Out: tapReader{ReadCloser: p.out, tp: tp}, ThreadID: threadID, Cwd: "/work/project",
				Emit: func(d event.Draft) {
					tp.add(step{Op: "event", Event: &wireEvent{Type: d.Type, TurnID: d.TurnID, Data: d.Data}})
					rec.emit(d)
				}})
			call := func(s step) {
				s.Op = "call"
				tp.add(s)
				if err := runCall(testCtx(t), a, s); err != nil {
					t.Fatal(err)
				}
			}
			sc.run(t, call, rec)
			_ = p.in.Close()
			<-a.Done()
			var buf bytes.Buffer
			for _, s := range tp.steps {
				b, _ := json.Marshal(s)
				buf.Write(append(b, '\n'))
			}
			if err := os.MkdirAll(transcriptDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(transcriptDir, "echo-"+name+".jsonl"), buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}

type scenario struct {
	prepare func(t *testing.T, home string) string // returns Options.ThreadID
	run     func(t *testing.T, call func(step), rec *recorder)
}

func noThread(*testing.T, string) string { return "" }

var recordScenarios = map[string]scenario{
	"turn": {prepare: noThread, run: func(t *testing.T, call func(step), rec *recorder) {
		call(step{Call: "start"})
		call(step{Call: "turn", TurnID: "t_1", Text: "hello"})
		rec.waitFor(t, event.TurnCompleted, "t_1")
	}},
	"resume": {prepare: func(t *testing.T, home string) string {
		a, p, rec := newEchoAdapter(t, home, "")
		res, err := a.Start(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.StartTurn(testCtx(t), "t_0", "before"); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, event.TurnCompleted, "t_0")
		_ = p.in.Close()
		<-a.Done()
		return res.ThreadID
	}, run: func(t *testing.T, call func(step), rec *recorder) {
		call(step{Call: "start"})
		call(step{Call: "turn", TurnID: "t_1", Text: "after"})
		rec.waitFor(t, event.TurnCompleted, "t_1")
	}},
	"replaced": {prepare: func(*testing.T, string) string { return "thr_0000000000000000" }, run: func(t *testing.T, call func(step), rec *recorder) {
		call(step{Call: "start"})
	}},
	"approval": {prepare: noThread, run: func(t *testing.T, call func(step), rec *recorder) {
		call(step{Call: "start"})
		for i, approve := range []bool{true, false} {
			turn := fmt.Sprintf("t_%d", i+1)
			call(step{Call: "turn", TurnID: turn, Text: "ls /approve"})
			d := decode[event.ApprovalRequestedData](t, rec.waitFor(t, event.ApprovalRequested, turn))
			call(step{Call: "respond", RequestID: d.RequestID, Approve: approve})
			rec.waitFor(t, event.TurnCompleted, turn)
		}
	}},
	"interrupt": {prepare: noThread, run: func(t *testing.T, call func(step), rec *recorder) {
		call(step{Call: "start"})
		call(step{Call: "turn", TurnID: "t_1", Text: "/sleep 600000"})
		call(step{Call: "interrupt"})
		rec.waitFor(t, event.TurnCompleted, "t_1")
	}},
	"crash": {prepare: noThread, run: func(t *testing.T, call func(step), rec *recorder) {
		call(step{Call: "start"})
		call(step{Call: "turn", TurnID: "t_1", Text: "/crash"})
		rec.waitFor(t, event.MessageDelta, "t_1")
	}},
}
