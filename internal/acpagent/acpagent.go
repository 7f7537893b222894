// Package acpagent is `sessiond acp`: an ACP (version 1) agent on stdio
// that bridges an editor to the daemon (PROTOCOL.md "sessiond acp").
// Every ACP session is a sessiond session held by `acp:<pid>` with a ttl
// the bridge renews while it lives; the turns run in the daemon, so an
// editor that goes away stops none of them.
package acpagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/version"
)

// Bounds and clocks.
const (
	// maxLine bounds one line from the editor; a longer one is answered
	// -32600 and skipped.
	maxLine = 8 << 20
	// maxPrompt bounds a prompt's text (the daemon's send bounds it too).
	maxPrompt = 1 << 20
	// holdTTL is the bridge's hold ttl, renewed every holdRenew: a bridge
	// that dies (even SIGKILL) leaves holds that end by themselves.
	holdTTL   = 20 * time.Second
	holdRenew = holdTTL / 4
)

// JSON-RPC error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeNoMethod       = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
)

type flags struct {
	provider, account, socket, stateDir, config string
}

// Run is `sessiond acp ARGS`: it serves ACP on stdin/stdout until stdin
// ends and returns the exit code.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("acp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f flags
	fs.StringVar(&f.provider, "provider", "", "provider of new sessions (default: the first configured one that is not echo, else echo)")
	fs.StringVar(&f.account, "account", "", "account of new sessions (default: the profile's default)")
	fs.StringVar(&f.socket, "socket", "", "daemon socket (default as serve's)")
	fs.StringVar(&f.stateDir, "state-dir", "", "state dir of a daemon this starts")
	fs.StringVar(&f.config, "config", "", "config file of a daemon this starts")
	if err := fs.Parse(args); err != nil {
		return exitcode.Usage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "sessiond acp: unexpected argument %q\n", fs.Arg(0))
		return exitcode.Usage
	}
	f.socket = rpc.SocketPath(f.socket, os.Getenv)
	b := newBridge(f, stdout, stderr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := rpc.ClientOptions{Name: "sessiond-acp", Version: version.String(), OnNotify: b.onNotify}
	c, err := dialDaemon(ctx, f, o)
	if err != nil {
		fmt.Fprintln(stderr, "sessiond acp:", err)
		return exitcode.NoDaemon
	}
	b.d = newDaemonLink(c)
	defer func() {
		cancel()
		// Never waits: a reconnect the cancel abandoned leaves no link ready.
		if c := b.d.current(); c != nil {
			c.Close()
		}
	}()
	if f.account != "" && !slices.Contains(c.Init.Capabilities, capAccounts) {
		b.logf("--account %s: accounts are not supported by this daemon (it does not offer %s): session/new is refused", f.account, capAccounts)
	}
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		b.supervise(ctx, o)
	}()
	defer func() { cancel(); <-supervised }()
	go b.renew(ctx)
	if !b.serve(ctx, stdin) {
		return exitcode.NoDaemon
	}
	return exitcode.OK
}

// capAccounts is the daemon capability that gives create its account.
const capAccounts = "agent-session.accounts.v1"

// logf writes one line to stderr (editors keep an agent's stderr as its log).
func (b *bridge) logf(format string, args ...any) {
	fmt.Fprintf(b.stderr, "sessiond acp: "+format+"\n", args...)
}

// bridge is one editor's connection.
type bridge struct {
	f      flags
	d      *daemonLink
	stderr io.Writer
	holder string

	wmu sync.Mutex
	out *bufio.Writer
	eof bool // stdin ended: the editor is gone, nothing more is written

	mu       sync.Mutex
	sessions map[string]*session
	nextID   int64
	pending  map[int64]chan response // our requests to the editor
	provider string                  // resolved default provider
	closing  bool                    // serve is ending: no new request goroutines (wg.Add under mu)
	wg       sync.WaitGroup
}

func newBridge(f flags, stdout, stderr io.Writer) *bridge {
	return &bridge{f: f, stderr: stderr, holder: fmt.Sprintf("acp:%d", os.Getpid()),
		out: bufio.NewWriter(stdout), sessions: map[string]*session{}, pending: map[int64]chan response{}}
}

// message is one JSON-RPC message from the editor.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *wireError      `json:"error,omitempty"`
}

type wireError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *wireError) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

type response struct {
	result json.RawMessage
	err    *wireError
}

// send writes one message as a line.
func (b *bridge) send(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(b.stderr, "sessiond acp: marshal:", err)
		return
	}
	b.wmu.Lock()
	defer b.wmu.Unlock()
	if b.eof {
		return
	}
	b.out.Write(line)
	b.out.WriteByte('\n')
	b.out.Flush()
}

func (b *bridge) reply(id json.RawMessage, result any) {
	b.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (b *bridge) fail(id json.RawMessage, e *wireError) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b.send(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
}

func (b *bridge) notify(method string, params any) {
	b.send(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

// request asks the editor: the request is written before it returns (so
// it precedes whatever the caller writes next); wait waits for the answer.
func (b *bridge) request(method string, params any) (wait func(ctx context.Context) (json.RawMessage, error)) {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan response, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	b.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return func(ctx context.Context) (json.RawMessage, error) {
		defer func() {
			b.mu.Lock()
			delete(b.pending, id)
			b.mu.Unlock()
		}()
		select {
		case r := <-ch:
			if r.err != nil {
				return nil, r.err
			}
			return r.result, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// serve reads the editor's lines until stdin ends (true) or the daemon is
// gone for good (false: every pending request is answered with why
// first). Nothing the editor sends is fatal; stdin's end leaves every
// turn running in the daemon.
func (b *bridge) serve(ctx context.Context, stdin io.Reader) bool {
	ctx, cancel := context.WithCancel(ctx)
	eof := make(chan struct{})
	go func() {
		defer close(eof)
		r := bufio.NewReaderSize(stdin, 64<<10)
		for {
			line, err := readLine(r)
			if errors.Is(err, errLineTooLong) {
				b.fail(nil, &wireError{Code: codeInvalidRequest, Message: fmt.Sprintf("message longer than %d bytes: skipped", maxLine)})
				continue
			}
			if len(line) > 0 {
				b.handleLine(ctx, line)
			}
			if err != nil {
				return
			}
		}
	}()
	gone := false
	select {
	case <-eof:
		// The editor is gone: nothing more is written.
		b.wmu.Lock()
		b.eof = true
		b.wmu.Unlock()
	case <-b.d.dead:
		// Pending prompts answer with the daemon's loss (they watch
		// dead) before the bridge exits; the reader is left to the exit.
		gone = true
	}
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	cancel() // pending permission requests end; their approvals stay open in the daemon
	b.wg.Wait()
	b.wmu.Lock()
	b.eof = true
	b.wmu.Unlock()
	return !gone
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line up to maxLine bytes; a longer one is drained
// and reported as errLineTooLong.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > maxLine {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

func (b *bridge) handleLine(ctx context.Context, line []byte) {
	trimmed := trimSpace(line)
	if len(trimmed) == 0 {
		return
	}
	if trimmed[0] == '[' && json.Valid(trimmed) {
		b.fail(nil, &wireError{Code: codeInvalidRequest, Message: "batches are not supported: send one request per line"})
		return
	}
	var m message
	if err := json.Unmarshal(trimmed, &m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			b.fail(nil, &wireError{Code: codeInvalidRequest, Message: "invalid request: " + err.Error()})
			return
		}
		b.fail(nil, &wireError{Code: codeParse, Message: "parse error: " + err.Error()})
		return
	}
	switch {
	case m.Method == "" && m.ID != nil && (m.Result != nil || m.Error != nil): // an answer to our request
		var id int64
		if json.Unmarshal(m.ID, &id) != nil {
			return
		}
		b.mu.Lock()
		ch := b.pending[id]
		b.mu.Unlock()
		if ch != nil {
			ch <- response{result: m.Result, err: m.Error}
		}
	case m.Method == "":
		b.fail(nil, &wireError{Code: codeInvalidRequest, Message: "neither a request nor an answer"})
	case m.ID == nil || string(m.ID) == "null":
		b.handleNotification(m)
	default:
		if !validID(m.ID) {
			b.fail(nil, &wireError{Code: codeInvalidRequest, Message: "invalid request: id must be a string or a number, not " + shortJSON(m.ID)})
			return
		}
		b.mu.Lock()
		if b.closing {
			b.mu.Unlock()
			return
		}
		b.wg.Add(1)
		b.mu.Unlock()
		go func() { // a prompt waits for its turn: requests never block the reader
			defer b.wg.Done()
			res, err := b.handleRequest(ctx, m)
			if err != nil {
				b.fail(m.ID, err)
				return
			}
			b.reply(m.ID, res)
		}()
	}
}

// validID: a request's id is a string or a number (JSON-RPC 2.0 §4).
func validID(id json.RawMessage) bool {
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// shortJSON is at most 64 bytes of raw JSON, for an error message.
func shortJSON(raw json.RawMessage) string {
	if len(raw) > 64 {
		return string(raw[:64]) + "…"
	}
	return string(raw)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

func (b *bridge) handleNotification(m message) {
	if m.Method != "session/cancel" {
		return // unknown notifications are ignored (JSON-RPC)
	}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r api.CancelResult
	if err := b.call(ctx, "agentSession.cancel", api.SessionParams{SessionID: p.SessionID}, &r); err != nil {
		fmt.Fprintln(b.stderr, "sessiond acp: cancel:", err)
	}
}

func (b *bridge) handleRequest(ctx context.Context, m message) (any, *wireError) {
	switch m.Method {
	case "initialize":
		return b.initialize(m.Params)
	case "authenticate":
		return struct{}{}, nil
	case "session/new":
		return b.newSession(ctx, m.Params)
	case "session/load":
		return b.loadSession(ctx, m.Params)
	case "session/prompt":
		return b.prompt(ctx, m.Params)
	case "session/list":
		return b.list(ctx, m.Params)
	case "session/close":
		return b.closeSession(ctx, m.Params)
	}
	return nil, &wireError{Code: codeNoMethod, Message: "method not found: " + m.Method}
}

func (b *bridge) initialize(params json.RawMessage) (any, *wireError) {
	var p struct {
		ProtocolVersion *int `json:"protocolVersion"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.ProtocolVersion == nil {
		return nil, &wireError{Code: codeInvalidParams, Message: "initialize needs protocolVersion"}
	}
	if *p.ProtocolVersion != 1 {
		return nil, &wireError{Code: codeInvalidParams,
			Message: fmt.Sprintf("sessiond acp speaks ACP protocol version 1, not %d", *p.ProtocolVersion),
			Data:    map[string]any{"supported": []int{1}}}
	}
	return map[string]any{
		"protocolVersion": 1,
		"agentCapabilities": map[string]any{
			"loadSession":         true,
			"promptCapabilities":  map[string]any{},
			"sessionCapabilities": map[string]any{"list": map[string]any{}, "close": map[string]any{}},
		},
		"agentInfo":   map[string]any{"name": "sessiond", "version": version.String()},
		"authMethods": []any{},
	}, nil
}

// fromDaemon maps a daemon error onto a JSON-RPC error for the editor:
// invalid params stay invalid params, the rest is internal, named.
func fromDaemon(err error) *wireError {
	var re *rpc.Error
	if errors.As(err, &re) {
		code := int64(codeInternal)
		if re.Code == codeInvalidParams || re.Reason == "invalid_params" {
			code = codeInvalidParams
		}
		return &wireError{Code: code, Message: re.Message, Data: map[string]any{"reason": re.Reason, "code": re.Code}}
	}
	return &wireError{Code: codeInternal, Message: err.Error()}
}
