package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/sessiond/sessiond/internal/api"
)

// clientMaxMessage bounds what the client reads (a large attach page fits).
const clientMaxMessage = 256 << 20

// ClientOptions configure Dial.
type ClientOptions struct {
	Name, Version string
	// Device is initialize's client.device ("" : none sent).
	Device string
	// Capabilities to ask for; nil = all the server may have.
	Capabilities []string
	Framing      Framing
	// OnNotify is called, in order, on the client's read loop for every
	// notification; it must not call back into the client synchronously.
	OnNotify func(method string, params json.RawMessage)
	// SkipInitialize leaves the handshake to the caller (tests).
	SkipInitialize bool
}

// Client is a JSON-RPC connection to sessiond.
type Client struct {
	jc   *jsonrpc2.Conn
	o    ClientOptions
	Init InitializeResult // the handshake's result
}

// Dial connects to the socket at path and, unless SkipInitialize, runs
// initialize with protocol version 1.
func Dial(ctx context.Context, path string, o ClientOptions) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	return DialConn(ctx, nc, o)
}

// DialConn is Dial over a connection made otherwise (`ctl --remote`: one
// end of a socket pair whose other end is `ssh HOST sessiond proxy`'s
// stdio); the client owns nc, closed with it.
func DialConn(ctx context.Context, nc net.Conn, o ClientOptions) (*Client, error) {
	st := newStream(nc, bufio.NewReaderSize(nc, 64<<10), o.Framing, clientMaxMessage, 0)
	st.client = true
	c := &Client{o: o}
	c.jc = jsonrpc2.NewConn(context.Background(), st, jsonrpc2.HandlerWithError(c.handle),
		jsonrpc2.SetLogger(nopLogger{}))
	if o.SkipInitialize {
		return c, nil
	}
	caps := o.Capabilities
	if caps == nil {
		caps = Capabilities
	}
	if _, err := c.Initialize(ctx, api.ProtocolVersion, caps); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Initialize runs the handshake (Dial does it unless SkipInitialize).
func (c *Client) Initialize(ctx context.Context, version int, caps []string) (InitializeResult, error) {
	name := c.o.Name
	if name == "" {
		name = "sessiond-go-client"
	}
	p := InitializeParams{ProtocolVersion: &version, Client: ClientInfo{Name: name, Version: c.o.Version, Device: c.o.Device}, Capabilities: caps}
	if caps == nil {
		p.Capabilities = []string{}
	}
	var r InitializeResult
	if err := c.Call(ctx, "initialize", p, &r); err != nil {
		return r, err
	}
	c.Init = r
	return r, nil
}

func (c *Client) handle(_ context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
	if req.Notif {
		if c.o.OnNotify != nil {
			var p json.RawMessage
			if req.Params != nil {
				p = *req.Params
			}
			c.o.OnNotify(req.Method, p)
		}
		return nil, nil
	}
	return nil, &jsonrpc2.Error{Code: CodeMethodNotFound, Message: "client answers no requests"}
}

// Call sends one request and waits for its answer. A server error is an
// *Error (match it with errors.As or errors.Is on &Error{Reason: …}).
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	if params == nil {
		params = struct{}{}
	}
	err := c.jc.Call(ctx, method, params, result)
	var je *jsonrpc2.Error
	if errors.As(err, &je) {
		return fromWire(je)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// Done is closed when the connection is gone (either side closed it).
func (c *Client) Done() <-chan struct{} { return c.jc.DisconnectNotify() }

// Close closes the connection.
func (c *Client) Close() error {
	err := c.jc.Close()
	if errors.Is(err, jsonrpc2.ErrClosed) {
		return nil
	}
	return err
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
