package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/sessiond/sessiond/internal/sysx"
)

// echoServerFlag re-executes this binary as the baseline: a bare
// sourcegraph/jsonrpc2 server on a Unix socket that answers every request
// with its params, newline-delimited JSON as the daemon speaks it. It is a
// separate process, like the daemon, so both sides pay the same socket and
// scheduling costs. A connection that calls echoReplayMethod is answered
// instead with the results recorded by echoRecordMethod (echoreplay.go).
const echoServerFlag = "--internal-echo-server"

func echoServerMain(sock string) int {
	l, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo server:", err)
		return 1
	}
	var replies recordedReplies
	h := jsonrpc2.HandlerWithError(func(_ context.Context, c *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
		if res, ok, err := replies.answer(c, r); ok {
			return res, err
		}
		if r.Params == nil {
			return json.RawMessage("{}"), nil
		}
		return *r.Params, nil
	})
	for {
		c, err := l.Accept()
		if err != nil {
			return 0
		}
		jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(c), h)
	}
}

// echoServer is the running baseline process.
type echoServer struct {
	socket string
	cmd    *exec.Cmd
}

func (b *bench) startEcho() (*echoServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	e := &echoServer{socket: filepath.Join(b.dir("e"), "echo.sock")}
	e.cmd = exec.Command(exe, echoServerFlag, e.socket)
	e.cmd.Stderr = os.Stderr
	sysx.Tie(e.cmd, syscall.SIGKILL)
	if err := e.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", e.socket)
		if err == nil {
			c.Close()
			return e, nil
		}
		if time.Now().After(deadline) {
			e.stop()
			return nil, fmt.Errorf("echo server not accepting: %w", err)
		}
		time.Sleep(time.Millisecond) // no signal from another process but a connect
	}
}

func (e *echoServer) stop() {
	e.cmd.Process.Kill()
	e.cmd.Wait()
}
