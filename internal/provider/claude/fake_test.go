package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a scripted CLI on the other end of two pipes.
type fake struct {
	a     *Adapter
	outW  *io.PipeWriter // the CLI's stdout
	lines chan []byte    // what the adapter wrote to the CLI's stdin
	evs   chan event.Draft
	logMu sync.Mutex
	logs  bytes.Buffer
}

func (f *fake) Write(p []byte) (int, error) {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return f.logs.Write(p)
}

func (f *fake) log() string {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return f.logs.String()
}

func newFake(t *testing.T, mod func(*provider.Options)) *fake {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	f := &fake{outW: outW, lines: make(chan []byte, 1024), evs: make(chan event.Draft, 1024)}
	o := provider.Options{In: inW, Out: outR, Emit: func(d event.Draft) { f.evs <- d },
		Logger: slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})), RequestTimeout: 10 * time.Second}
	if mod != nil {
		mod(&o)
	}
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			f.lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	f.a = NewAdapter(o)
	t.Cleanup(func() {
		_ = outW.Close()
		<-f.a.Done()
		_ = inR.Close()
		<-pumped
	})
	return f
}

// send writes one line of CLI output (a value is JSON-encoded).
func (f *fake) send(t *testing.T, v any) {
	t.Helper()
	b, ok := v.(string)
	if !ok {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b = string(j)
	}
	if _, err := f.outW.Write([]byte(b + "\n")); err != nil {
		t.Fatal(err)
	}
}

// read returns the next line the adapter wrote, decoded.
func (f *fake) read(t *testing.T) map[string]any {
	t.Helper()
	select {
	case l := <-f.lines:
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("adapter wrote %q: %v", l, err)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("adapter wrote nothing")
	}
	return nil
}

// next returns the next event of type typ.
func (f *fake) next(t *testing.T, typ string) event.Draft {
	t.Helper()
	for {
		select {
		case d := <-f.evs:
			if d.Type == typ {
				return d
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s event", typ)
		}
	}
}

// started runs Start against the fake's initialize answer and opens a turn.
func (f *fake) started(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := f.a.Start(t.Context()); done <- err }()
	init := f.read(t)
	f.send(t, map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success",
		"request_id": init["request_id"], "response": map[string]any{}}})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := f.a.StartTurn(t.Context(), "t_1", "hi"); err != nil {
		t.Fatal(err)
	}
	if m := f.read(t); m["type"] != "user" {
		t.Fatalf("turn wrote %v", m)
	}
	f.send(t, map[string]any{"type": "system", "subtype": "init", "session_id": "sess-1"})
}

func decodeData[T any](t *testing.T, d event.Draft) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(d.Data, &v); err != nil {
		t.Fatalf("%s %s: %v", d.Type, d.Data, err)
	}
	return v
}
