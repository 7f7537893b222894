package codex

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/provider"
)

// pausableRuntime is newFakeRuntime over an os.Pipe stdout (its reads
// can be stopped: a runtime over it can be paused).
func pausableRuntime(t *testing.T) *fakeRuntime {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fr := &fakeRuntime{logs: &syncBuffer{}, outW: outW, lines: make(chan []byte, 1024)}
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			fr.lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	fr.rt = newRuntime(provider.RuntimeOptions{In: inW, Out: outR,
		Logger: slog.New(slog.NewTextHandler(fr.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	fr.f = &fake{outW: outW, lines: fr.lines, logs: fr.logs}
	t.Cleanup(func() {
		_ = outW.Close()
		<-fr.rt.Done()
		_ = inR.Close()
		<-pumped
	})
	return fr
}

// TestRuntimePauseRefusesRequestInFlight: a request of one thread still
// waiting for its answer refuses the runtime's Pause (its answer would
// reach an image whose caller is gone) and the reader goes on: the
// answer is still delivered. Once it is, Pause returns the runtime's
// state and the thread's (its open turn).
func TestRuntimePauseRefusesRequestInFlight(t *testing.T) {
	fr := pausableRuntime(t)
	f := fr.f
	hs := make(chan error, 1)
	go func() { hs <- fr.rt.Handshake(testCtx(t)) }()
	f.reply(t, f.expect(t, "initialize"), map[string]any{"userAgent": "fake"})
	f.expect(t, "initialized")
	if err := <-hs; err != nil {
		t.Fatal(err)
	}
	a, _ := fr.thread(t, "thr_A")
	errc := make(chan error, 1)
	go func() { errc <- a.StartTurn(testCtx(t), "t_a", "hi") }()
	req := f.expect(t, "turn/start")
	_, err := fr.rt.Pause(testCtx(t))
	if err == nil {
		fr.rt.Resume() // a paused reader would never see the pipe's end
	}
	if !errors.Is(err, provider.ErrRequestInFlight) || !strings.Contains(err.Error(), "turn/start") {
		t.Fatalf("pause with turn/start unanswered: %v", err)
	}
	f.reply(t, req, map[string]any{"turn": map[string]any{"id": "pa", "status": "inProgress"}})
	if err := <-errc; err != nil {
		t.Fatalf("turn/start after the refused pause: %v", err)
	}
	p, err := fr.rt.Pause(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer fr.rt.Resume()
	var st runtimeState
	if err := json.Unmarshal(p.State, &st); err != nil || st.Next < 3 || len(st.Threads) != 1 || st.Threads[0] != "thr_A" {
		t.Fatalf("runtime state %s (%v)", p.State, err)
	}
	ts, err := fr.rt.ThreadState(a)
	if err != nil || !strings.Contains(string(ts), `"ours":"t_a"`) || !strings.Contains(string(ts), `"provider":"pa"`) {
		t.Fatalf("thread state %s (%v)", ts, err)
	}
}
