package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"

	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/sysx"
)

// proxyClient is a rawClient whose connection is `sessiond proxy`'s stdio
// (one end of a socket pair), for the replay figure through the proxy.
type proxyClient struct {
	*rawClient
	cmd *exec.Cmd
}

func dialProxy(ctx context.Context, bin, sock string) (*proxyClient, error) {
	ours, theirs, err := sysx.SocketPair()
	if err != nil {
		return nil, err
	}
	defer ours.Close()
	defer theirs.Close()
	cmd := exec.Command(bin, "proxy", "--socket", sock)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = theirs, theirs, os.Stderr
	sysx.Tie(cmd, syscall.SIGKILL)
	c, err := net.FileConn(ours)
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		c.Close()
		return nil, err
	}
	p := &proxyClient{rawClient: &rawClient{c: c, br: bufio.NewReaderSize(c, 1<<20)}, cmd: cmd}
	var init json.RawMessage
	ip := rpc.InitializeParams{ProtocolVersion: new(1), Client: rpc.ClientInfo{Name: "sessiond-bench-proxy"}, Capabilities: rpc.Capabilities}
	if err := p.Call(ctx, "initialize", ip, &init); err != nil {
		p.Close()
		return nil, fmt.Errorf("through sessiond proxy: %w", err)
	}
	return p, nil
}

// Close ends the connection; the proxy sees EOF and exits 0.
func (p *proxyClient) Close() error {
	p.rawClient.Close()
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("sessiond proxy: %w", err)
	}
	return nil
}
