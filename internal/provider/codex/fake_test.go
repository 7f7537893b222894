package codex

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"
)

// fake is a scripted provider on the other end of two pipes.
type fake struct {
	a     *Adapter
	rec   *recorder
	logs  *syncBuffer
	outW  io.WriteCloser // the provider's stdout
	lines chan []byte    // what the adapter wrote to the provider's stdin
}

func newFake(t *testing.T, mod func(*Options)) *fake {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	f := &fake{rec: newRecorder(), logs: &syncBuffer{}, outW: outW, lines: make(chan []byte, 1024)}
	o := Options{
		In: inW, Out: outR, Cwd: "/work", Emit: f.rec.emit,
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&o)
	}
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		sc := bufio.NewScanner(inR)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
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

// send writes one line of provider output (a value is JSON-encoded).
func (f *fake) send(t *testing.T, v any) {
	t.Helper()
	var b []byte
	switch x := v.(type) {
	case string:
		b = []byte(x)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.outW.Write(append(b, '\n')); err != nil {
		t.Fatalf("provider write: %v", err)
	}
}

// expect reads the adapter's next line and returns it decoded.
func (f *fake) expect(t *testing.T, method string) map[string]any {
	t.Helper()
	select {
	case b := <-f.lines:
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("adapter wrote unparseable %q", b)
		}
		if got, _ := m["method"].(string); got != method {
			t.Fatalf("adapter wrote %s, want method %q", b, method)
		}
		return m
	case <-time.After(waitLong):
		t.Fatalf("adapter wrote nothing; want %q", method)
		return nil
	}
}

// reply answers the request m with result.
func (f *fake) reply(t *testing.T, m map[string]any, result any) {
	t.Helper()
	f.send(t, map[string]any{"id": m["id"], "result": result})
}

// handshake plays initialize/initialized and thread/start as thr_1 while
// Start runs; it returns Start's outcome.
func (f *fake) handshake(t *testing.T) StartResult {
	t.Helper()
	type out struct {
		r   StartResult
		err error
	}
	ch := make(chan out, 1)
	go func() {
		r, err := f.a.Start(testCtx(t))
		ch <- out{r, err}
	}()
	f.reply(t, f.expect(t, "initialize"), map[string]any{"userAgent": "fake"})
	f.expect(t, "initialized")
	f.reply(t, f.expect(t, "thread/start"), map[string]any{"thread": map[string]any{"id": "thr_1"}})
	o := <-ch
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.r
}

// startTurn runs StartTurn(turnID) against the fake, answering provTurn.
func (f *fake) startTurn(t *testing.T, turnID, provTurn string) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- f.a.StartTurn(testCtx(t), turnID, "hi") }()
	m := f.expect(t, "turn/start")
	want := map[string]any{"threadId": "thr_1", "input": []any{map[string]any{"type": "text", "text": "hi"}}}
	if !reflect.DeepEqual(m["params"], want) {
		t.Fatalf("turn/start params %v", m["params"])
	}
	f.reply(t, m, map[string]any{"turn": map[string]any{"id": provTurn, "status": "inProgress"}})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
