package echo

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
)

// server is one echo provider process's protocol state.
//
// Lock order: server.mu, then writer.mu (writes may happen with mu held so
// a response and the state change it reports stay in order).
type server struct {
	in    *bufio.Reader
	w     *writer
	store threadStore
	log   *slog.Logger

	eof  chan struct{} // closed when stdin ends
	exit chan int      // a turn asks the process to exit (e.g. /crash)

	mu          sync.Mutex
	initialized bool
	threads     map[string]*thread              // threads loaded by this process
	approvals   map[string]chan json.RawMessage // our request id -> the client's result
	nextReq     int
}

// thread is a loaded thread; active is its running turn, if any.
type thread struct {
	id, cwd string
	turns   int
	active  *activeTurn
	lock    *os.File // the thread's writer lock, held while the process lives
}

type activeTurn struct {
	id        string
	cancel    chan struct{} // closed by turn/interrupt
	cancelled bool
}

func newServer(stdin io.Reader, stdout io.Writer, st threadStore, log *slog.Logger) *server {
	return &server{
		in:        bufio.NewReaderSize(stdin, 64<<10),
		w:         newWriter(stdout),
		store:     st,
		log:       log,
		eof:       make(chan struct{}),
		exit:      make(chan int, 1),
		threads:   map[string]*thread{},
		approvals: map[string]chan json.RawMessage{},
	}
}

// run reads stdin until EOF (exit code 0) or a turn asks to exit.
func (s *server) run() int {
	go s.readLoop()
	select {
	case <-s.eof:
		s.log.Info("stdin closed; exiting")
		s.w.flush()
		return exitOK
	case code := <-s.exit:
		s.w.flush()
		return code
	}
}

func (s *server) readLoop() {
	defer close(s.eof)
	for {
		line, err := s.in.ReadBytes('\n')
		if len(line) > 0 {
			s.handleLine(line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Warn("read stdin", "err", err)
			}
			return
		}
	}
}

func (s *server) handleLine(line []byte) {
	var m inMsg
	if err := json.Unmarshal(line, &m); err != nil {
		if len(trimSpace(line)) > 0 {
			s.log.Warn("skipping unparseable line", "err", err, "bytes", len(line))
		}
		return
	}
	switch {
	case m.Method != "" && m.hasID():
		s.handleRequest(&m)
	case m.Method != "":
		s.handleNotification(&m)
	case m.hasID():
		s.handleResponse(&m)
	default:
		s.log.Warn("skipping message with neither method nor id")
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}

func (s *server) handleNotification(m *inMsg) {
	if m.Method != "initialized" {
		s.log.Debug("ignoring notification", "method", m.Method)
	}
}

func (s *server) handleRequest(m *inMsg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Method == "initialize" {
		if s.initialized {
			s.w.fail(m.ID, rpcError{Code: codeInvalidRequest, Message: "Already initialized"})
			return
		}
		s.initialized = true
		s.w.result(m.ID, map[string]any{
			"userAgent": "sessiond-echo/1", "platformFamily": "unix", "platformOs": "linux",
		})
		return
	}
	if !s.initialized {
		s.w.fail(m.ID, rpcError{Code: codeInvalidRequest, Message: "Not initialized"})
		return
	}
	switch m.Method {
	case "thread/start":
		s.threadStartLocked(m)
	case "thread/resume":
		s.threadResumeLocked(m)
	case "turn/start":
		s.turnStartLocked(m)
	case "turn/interrupt":
		s.turnInterruptLocked(m)
	case "thread/unsubscribe":
		s.threadUnsubscribeLocked(m)
	default:
		s.w.fail(m.ID, rpcError{Code: codeMethodNotFound, Message: "method not found: " + m.Method})
	}
}

func (s *server) threadStartLocked(m *inMsg) {
	var p struct {
		Cwd string `json:"cwd"`
	}
	_ = json.Unmarshal(m.Params, &p)
	id := newThreadID()
	if err := s.store.create(id, p.Cwd); err != nil {
		s.w.fail(m.ID, rpcError{Code: codeInvalidRequest, Message: err.Error()})
		return
	}
	lock, err := s.store.lockWriter(id)
	if err != nil {
		s.w.fail(m.ID, rpcError{Code: codeInvalidRequest, Message: err.Error()})
		return
	}
	s.threads[id] = &thread{id: id, cwd: p.Cwd, lock: lock}
	th := map[string]any{"id": id, "cwd": p.Cwd, "turns": []any{}}
	s.w.result(m.ID, map[string]any{"thread": th})
	s.w.notify("thread/started", map[string]any{"thread": th})
}

func (s *server) threadResumeLocked(m *inMsg) {
	var p struct {
		ThreadID string `json:"threadId"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.ThreadID == "" {
		s.w.fail(m.ID, rpcError{Code: codeInvalidParams, Message: "threadId required"})
		return
	}
	h, turns, err := s.store.load(p.ThreadID)
	if errors.Is(err, errThreadNotFound) {
		s.w.fail(m.ID, rpcError{
			Code:    codeInvalidRequest,
			Message: "no rollout found for thread id " + p.ThreadID,
			Data:    map[string]string{"type": "threadNotFound"},
		})
		return
	}
	if err != nil {
		s.w.fail(m.ID, rpcError{Code: codeInvalidRequest, Message: err.Error()})
		return
	}
	th, ok := s.threads[p.ThreadID]
	if !ok {
		// Like codex: one process writes a thread; another that has it
		// loaded keeps it until it exits (unsubscribing does not let go).
		lock, err := s.store.lockWriter(p.ThreadID)
		if err != nil {
			s.w.fail(m.ID, rpcError{Code: codeInvalidRequest, Message: err.Error()})
			return
		}
		th = &thread{id: p.ThreadID, cwd: h.Cwd, lock: lock}
		s.threads[p.ThreadID] = th
	}
	s.w.mute(th.id, false)
	th.turns = len(turns)
	past := make([]any, 0, len(turns))
	for _, t := range turns {
		past = append(past, map[string]any{"id": t.TurnID, "status": t.Status, "items": []any{}})
	}
	obj := map[string]any{"id": th.id, "cwd": th.cwd, "turns": past}
	s.w.result(m.ID, map[string]any{"thread": obj})
	s.w.notify("thread/started", map[string]any{"thread": map[string]any{"id": th.id, "cwd": th.cwd}})
}

type turnParams struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	Input    []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"input"`
}

func (s *server) turnStartLocked(m *inMsg) {
	var p turnParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		s.w.fail(m.ID, rpcError{Code: codeInvalidParams, Message: err.Error()})
		return
	}
	th, ok := s.threads[p.ThreadID]
	if !ok {
		s.w.fail(m.ID, rpcError{Code: codeInvalidRequest, Message: "thread not loaded: " + p.ThreadID})
		return
	}
	if th.active != nil {
		s.w.fail(m.ID, rpcError{Code: codeInvalidRequest, Message: "a turn is already in progress"})
		return
	}
	var text string
	for _, in := range p.Input {
		if in.Type == "text" {
			text += in.Text
		}
	}
	th.turns++
	tu := &activeTurn{id: fmt.Sprintf("turn_%s_%d", th.id[len(th.id)-6:], th.turns), cancel: make(chan struct{})}
	th.active = tu
	s.w.result(m.ID, map[string]any{"turn": map[string]any{"id": tu.id, "status": "inProgress", "items": []any{}}})
	go s.runTurn(th, tu, text)
}

func (s *server) turnInterruptLocked(m *inMsg) {
	var p turnParams
	_ = json.Unmarshal(m.Params, &p)
	th, ok := s.threads[p.ThreadID]
	if !ok || th.active == nil || (p.TurnID != "" && p.TurnID != th.active.id) {
		s.w.fail(m.ID, rpcError{Code: codeInvalidRequest, Message: "no active turn to interrupt"})
		return
	}
	s.w.result(m.ID, map[string]any{})
	if !th.active.cancelled {
		th.active.cancelled = true
		close(th.active.cancel)
	}
}

// threadUnsubscribeLocked stops the thread's events, as codex does: the
// thread stays loaded (and its writer lock held) until the process exits.
func (s *server) threadUnsubscribeLocked(m *inMsg) {
	var p struct {
		ThreadID string `json:"threadId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	status := "notLoaded"
	if _, ok := s.threads[p.ThreadID]; ok {
		status = "notSubscribed"
		if s.w.mute(p.ThreadID, true) {
			status = "unsubscribed"
		}
	}
	s.w.result(m.ID, map[string]any{"status": status})
}

// releaseWriterLocks lets go of every loaded thread's writer lock.
func (s *server) releaseWriterLocks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, th := range s.threads {
		if th.lock != nil {
			_ = th.lock.Close()
			th.lock = nil
		}
	}
}
