package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// Transcripts in testdata/transcripts are JSONL, one step per line:
//
//	{"op":"options","threadId":"…","cwd":"…"}       first line: the adapter's Options
//	{"op":"call","call":"start|turn|interrupt|respond", "turnId","text","requestId","approve"}
//	{"op":"c2s","msg":{…}}                           the adapter must write this (JSON-equal)
//	{"op":"s2c","msg":{…}} | {"op":"s2c","raw":"…"}  the provider writes this line
//	{"op":"event","event":{"type","turnId","data"}}  the next emitted event
//
// The replay feeds the provider side to an adapter through pipes, checks the
// client side and the emitted events in order, then ends the provider's
// stdout. Calls run one at a time, each after the previous returned.

const transcriptDir = "../../../testdata/transcripts"

type step struct {
	Op        string          `json:"op"`
	ThreadID  string          `json:"threadId,omitempty"`
	Cwd       string          `json:"cwd,omitempty"`
	Call      string          `json:"call,omitempty"`
	TurnID    string          `json:"turnId,omitempty"`
	Text      string          `json:"text,omitempty"`
	RequestID string          `json:"requestId,omitempty"`
	Approve   bool            `json:"approve,omitempty"`
	Msg       json.RawMessage `json:"msg,omitempty"`
	Raw       *string         `json:"raw,omitempty"`
	Event     *wireEvent      `json:"event,omitempty"`
}

type wireEvent struct {
	Type   string          `json:"type"`
	TurnID string          `json:"turnId,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

func loadTranscript(t *testing.T, path string) []step {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var s step
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		steps = append(steps, s)
	}
	if len(steps) == 0 || steps[0].Op != "options" {
		t.Fatalf("%s: first step must be options", path)
	}
	return steps
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func TestTranscriptReplay(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(transcriptDir, "*.jsonl"))
	if len(paths) < 4 {
		t.Fatalf("want recorded transcripts in %s, found %v", transcriptDir, paths)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) { replay(t, loadTranscript(t, path)) })
	}
}

func replay(t *testing.T, steps []step) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	events := make(chan event.Draft, 100000)
	lines := make(chan []byte, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(inR)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	a := NewAdapter(Options{In: inW, Out: outR, ThreadID: steps[0].ThreadID, Cwd: steps[0].Cwd,
		Emit: func(d event.Draft) { events <- d }})
	defer func() {
		_ = outW.Close()
		<-a.Done()
		_ = inR.Close()
		for range lines {
		}
	}()
	ctx := testCtx(t)
	var callErr chan error
	waitCall := func() {
		if callErr == nil {
			return
		}
		select {
		case err := <-callErr:
			if err != nil {
				t.Fatalf("call failed: %v", err)
			}
		case <-time.After(waitLong):
			t.Fatal("call did not return")
		}
		callErr = nil
	}
	for i, s := range steps[1:] {
		at := fmt.Sprintf("step %d (%s)", i+2, s.Op)
		switch s.Op {
		case "call":
			waitCall()
			callErr = make(chan error, 1)
			go func(s step) { callErr <- runCall(ctx, a, s) }(s)
		case "c2s":
			select {
			case got := <-lines:
				if !jsonEqual(got, s.Msg) {
					t.Fatalf("%s: adapter wrote\n %s\nwant\n %s", at, got, s.Msg)
				}
			case <-time.After(waitLong):
				t.Fatalf("%s: adapter wrote nothing; want %s", at, s.Msg)
			}
		case "s2c":
			line := []byte(s.Msg)
			if s.Raw != nil {
				line = []byte(*s.Raw)
			}
			if _, err := outW.Write(append(line, '\n')); err != nil {
				t.Fatalf("%s: %v", at, err)
			}
		case "event":
			select {
			case d := <-events:
				if d.Type != s.Event.Type || d.TurnID != s.Event.TurnID || (len(s.Event.Data) > 0 || len(d.Data) > 0) && !jsonEqual(d.Data, s.Event.Data) {
					t.Fatalf("%s: emitted %s %s %s, want %s %s %s", at, d.Type, d.TurnID, d.Data, s.Event.Type, s.Event.TurnID, s.Event.Data)
				}
			case <-time.After(waitLong):
				t.Fatalf("%s: no event; want %s", at, s.Event.Type)
			}
		default:
			t.Fatalf("%s: unknown op", at)
		}
	}
	waitCall()
	_ = outW.Close()
	<-a.Done()
	select {
	case d := <-events:
		t.Fatalf("unexpected extra event %s %s", d.Type, d.Data)
	case b := <-lines:
		t.Fatalf("unexpected extra client line %s", b)
	default:
	}
}

func runCall(ctx context.Context, a *Adapter, s step) error {
	switch s.Call {
	case "start":
		_, err := a.Start(ctx)
		return err
	case "turn":
		return a.StartTurn(ctx, s.TurnID, s.Text)
	case "interrupt":
		ok, err := a.Interrupt(ctx)
		if err == nil && !ok {
			err = fmt.Errorf("interrupt found no turn")
		}
		return err
	case "respond":
		return a.Respond(ctx, s.RequestID, decide(s.Approve))
	}
	return fmt.Errorf("unknown call %q", s.Call)
}
