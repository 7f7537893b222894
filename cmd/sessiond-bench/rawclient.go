package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/sessiond/sessiond/internal/rpc"
)

// rawClient is a lean newline-framed JSON-RPC client that decodes each
// response once, straight into the caller's type, as a JavaScript client's
// single JSON.parse does. internal/rpc.Client goes through
// sourcegraph/jsonrpc2, which decodes every response four times (validity
// scan, into interface{} to tell result from null, into a Response, then
// into the result); for large attach/read pages that dominates, so the
// replay figure is measured with both.
type rawClient struct {
	c    net.Conn
	br   *bufio.Reader
	id   int
	line []byte // CallPage's reused line buffer
}

func dialRaw(ctx context.Context, sock string) (*rawClient, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	r := &rawClient{c: c, br: bufio.NewReaderSize(c, 1<<20)}
	var init json.RawMessage
	p := rpc.InitializeParams{ProtocolVersion: new(1), Client: rpc.ClientInfo{Name: "sessiond-bench-raw"}, Capabilities: rpc.Capabilities}
	if err := r.Call(ctx, "initialize", p, &init); err != nil {
		c.Close()
		return nil, err
	}
	return r, nil
}

// Call sends one request and reads lines until its answer (notifications
// are skipped).
func (r *rawClient) Call(_ context.Context, method string, params, result any) error {
	r.id++
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.id, "method": method, "params": params})
	if err != nil {
		return err
	}
	if _, err := r.c.Write(append(req, '\n')); err != nil {
		return err
	}
	want := strconv.Itoa(r.id)
	for {
		line, err := r.br.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		var resp struct {
			ID     json.RawMessage `json:"id"`
			Result any             `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		resp.Result = result
		if err := json.Unmarshal(line, &resp); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if string(resp.ID) != want {
			continue // a notification
		}
		if len(resp.Error) > 0 && string(resp.Error) != "null" {
			return fmt.Errorf("%s: %s", method, resp.Error)
		}
		return nil
	}
}

// CallPage sends one request and walks its answer with scanPage (scan.go)
// instead of decoding it: the client's own cost per event stays far below
// the daemon's. The page aliases a buffer reused by the next call.
func (r *rawClient) CallPage(method string, params any) (page, error) {
	r.id++
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.id, "method": method, "params": params})
	if err != nil {
		return page{}, err
	}
	if _, err := r.c.Write(append(req, '\n')); err != nil {
		return page{}, err
	}
	want := strconv.Itoa(r.id)
	for {
		r.line = r.line[:0]
		for {
			frag, err := r.br.ReadSlice('\n')
			r.line = append(r.line, frag...)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				return page{}, fmt.Errorf("%s: %w", method, err)
			}
			break
		}
		p, err := scanPage(r.line)
		if err != nil {
			return page{}, fmt.Errorf("%s: %w", method, err)
		}
		if string(p.id) != want {
			continue // a notification
		}
		if p.err != nil {
			return page{}, fmt.Errorf("%s: %s", method, p.err)
		}
		return p, nil
	}
}

func (r *rawClient) Close() error { return r.c.Close() }
