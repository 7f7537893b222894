package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stream is a jsonrpc2.ObjectStream over one connection in one framing.
// Reads enforce the size limit before buffering a body; a batch is
// answered here (-32600 batch_not_supported) and reading goes on; every
// write carries a deadline, and a failed write closes the connection.
type stream struct {
	conn         net.Conn
	br           *bufio.Reader
	framing      Framing
	max          int
	writeTimeout time.Duration
	onBatch      func() // counts and logs a refused batch

	// The server's outbound budget (nil for the client's stream), this
	// stream's unwritten bytes in it, since when (unix ns) it has held
	// some with no byte written, and whether the budget closed it.
	budget  *outbound
	pending atomic.Int64
	frames  atomic.Int64 // frames counted and not yet done writing
	writing atomic.Int64 // the size of the frame being written (0: none)
	since   atomic.Int64
	shed    atomic.Bool
	// sent is every byte written to the socket; sentAt its value when
	// the stream last began to hold unwritten bytes (outbound.hold): what
	// the peer has read since then is sent - sentAt - its socket's unread
	// bytes (outbound.shed tells a slow reader from one that never reads).
	sent, sentAt atomic.Int64

	dl *deadlineReader // the server's read deadlines (admit.go); nil for the client

	client bool // the client's stream: messages are decoded by jsonrpc2.Conn (unmarshalClient)

	wmu sync.Mutex

	closeOnce sync.Once
	closedCh  chan struct{} // closed by Close (a failed write closes too)

	emu     sync.Mutex
	readErr error // why reading ended
	wrErr   error // why writing failed
}

func (s *stream) errs() (read, write error) {
	s.emu.Lock()
	defer s.emu.Unlock()
	return s.readErr, s.wrErr
}

func (s *stream) setErr(read bool, err error) error {
	s.emu.Lock()
	defer s.emu.Unlock()
	if read && s.readErr == nil {
		s.readErr = err
	}
	if !read && s.wrErr == nil {
		s.wrErr = err
	}
	return err
}

func newStream(conn net.Conn, br *bufio.Reader, f Framing, max int, wt time.Duration) *stream {
	return &stream{conn: conn, br: br, framing: f, max: max, writeTimeout: wt, closedCh: make(chan struct{})}
}

// ReadObject implements jsonrpc2.ObjectStream.
func (s *stream) ReadObject(v any) error {
	if err := s.readObject(v); err != nil {
		return s.setErr(true, err)
	}
	return nil
}

func (s *stream) readObject(v any) error {
	for {
		body, err := s.readFrame()
		if err != nil {
			return err
		}
		b := bytes.TrimLeft(body, " \t\r\n")
		if len(b) == 0 {
			if s.framing == FramingHeader {
				return fmt.Errorf("empty body: %w", ErrMalformed)
			}
			continue
		}
		if b[0] == '[' {
			if !json.Valid(b) {
				return ErrMalformed
			}
			if s.onBatch != nil {
				s.onBatch()
			}
			if err := s.writeBytes(batchErrorJSON); err != nil {
				return err
			}
			continue
		}
		dec := unmarshal
		if s.client {
			dec = unmarshalClient
		}
		if err := dec(b, v); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return nil
	}
}

// unmarshal decodes one message into v. The read loop's *inMessage
// decodes b by hand (simple.go, validating all of it) or with
// json.Unmarshal before anything else, so json.Unmarshal's own validating
// pass is skipped for it; any other v (a json.RawMessage copies without
// validating) goes through json.Unmarshal.
func unmarshal(b []byte, v any) error {
	if m, ok := v.(*inMessage); ok {
		return m.UnmarshalJSON(b)
	}
	return json.Unmarshal(b, v)
}

// unmarshalClient is unmarshal for the client's stream: jsonrpc2.Conn
// reads every message into its own type, whose UnmarshalJSON starts with
// json.Unmarshal of all of b (jsonrpc2 v0.2.3 conn.go, anyMessage), so
// the outer validating pass is skipped for it too.
func unmarshalClient(b []byte, v any) error {
	if u, ok := v.(json.Unmarshaler); ok {
		return u.UnmarshalJSON(b)
	}
	return json.Unmarshal(b, v)
}

var batchErrorJSON = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batches are not supported","data":{"reason":"batch_not_supported"}}}`)

func (s *stream) readFrame() ([]byte, error) {
	if s.dl != nil {
		if _, err := s.br.Peek(1); err != nil {
			return nil, err // waiting between messages: no stall deadline
		}
		s.dl.inFrame = true
		defer func() { s.dl.inFrame = false }()
	}
	if s.framing == FramingHeader {
		return s.readHeaderFrame()
	}
	return s.readLine()
}

// readLine reads one newline-terminated message, cut off as soon as it
// passes the limit (whatever has arrived is examined, not a full buffer).
func (s *stream) readLine() ([]byte, error) {
	buf, err := readUntilNewline(s.br, s.max)
	if errors.Is(err, errLineTooLong) {
		return nil, fmt.Errorf("over %d bytes: %w", s.max, ErrTooLarge)
	}
	if errors.Is(err, io.EOF) && len(bytes.TrimSpace(buf)) > 0 {
		return nil, fmt.Errorf("%d bytes without newline: %w", len(buf), ErrTruncated)
	}
	return buf, err
}

var errLineTooLong = errors.New("line too long")

// readUntilNewline returns a line (with its "\n"); more than limit bytes
// before the newline (a trailing "\r" not counted) is errLineTooLong, found
// as soon as those bytes have arrived. At EOF it returns what it read.
func readUntilNewline(br *bufio.Reader, limit int) ([]byte, error) {
	var buf []byte
	for {
		if br.Buffered() == 0 {
			if _, err := br.Peek(1); err != nil {
				return buf, err
			}
		}
		avail, _ := br.Peek(br.Buffered())
		if i := bytes.IndexByte(avail, '\n'); i >= 0 {
			buf = append(buf, avail[:i+1]...)
			br.Discard(i + 1)
			if len(bytes.TrimRight(buf, "\r\n")) > limit {
				return nil, errLineTooLong
			}
			return buf, nil
		}
		buf = append(buf, avail...)
		br.Discard(len(avail))
		if len(bytes.TrimRight(buf, "\r")) > limit {
			return nil, errLineTooLong
		}
	}
}

// readHeaderLine reads a line ending in "\n" or "\r\n", without it.
func (s *stream) readHeaderLine() (string, error) {
	buf, err := readUntilNewline(s.br, maxHeaderLine)
	switch {
	case errors.Is(err, errLineTooLong):
		return "", fmt.Errorf("header line over %d bytes: %w", maxHeaderLine, ErrBadHeader)
	case errors.Is(err, io.EOF) && len(buf) > 0:
		return "", fmt.Errorf("inside header: %w", ErrTruncated)
	case err != nil:
		return "", err
	}
	return strings.TrimRight(string(buf), "\r\n"), nil
}

// readHeaderFrame reads tolerant LSP headers (names case-insensitive,
// Content-Type and unknown headers ignored, "\n" or "\r\n"; Content-Length
// repeated with the same value is accepted, with two values refused) and
// then a body of at most max bytes, checked before the body is read.
func (s *stream) readHeaderFrame() ([]byte, error) {
	length, lines := int64(-1), 0
	for {
		line, err := s.readHeaderLine()
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(line) == "" {
			if lines == 0 {
				continue // blanks between messages
			}
			break
		}
		lines++
		if lines > maxHeaderLines {
			return nil, fmt.Errorf("over %d header lines: %w", maxHeaderLines, ErrBadHeader)
		}
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("header %.40q: %w", line, ErrBadHeader)
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("Content-Length %.40q: %w", val, ErrBadHeader)
			}
			if length >= 0 && n != length {
				return nil, fmt.Errorf("conflicting Content-Length headers %d and %d: %w", length, n, ErrBadHeader)
			}
			length = n
		}
	}
	if length < 0 {
		return nil, fmt.Errorf("no Content-Length: %w", ErrBadHeader)
	}
	if length > int64(s.max) {
		return nil, fmt.Errorf("Content-Length %d over %d: %w", length, s.max, ErrTooLarge)
	}
	body, err := readBody(s.br, int(length))
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("body of %d bytes: %w", length, ErrTruncated)
		}
		return nil, err
	}
	return body, nil
}

// readBody reads n bytes, holding only what has arrived (in chunks of
// 64 KiB, joined once the body is complete): a header alone does not make
// the daemon allocate its Content-Length, nor does a body stopped short
// hold more than it sent.
func readBody(r io.Reader, n int) ([]byte, error) {
	const chunk = 64 << 10
	if n <= chunk {
		body := make([]byte, n)
		_, err := io.ReadFull(r, body)
		return body, err
	}
	var parts [][]byte
	for got := 0; got < n; {
		p := make([]byte, min(chunk, n-got))
		if _, err := io.ReadFull(r, p); err != nil {
			return nil, err
		}
		parts = append(parts, p)
		got += len(p)
	}
	body := make([]byte, 0, n)
	for i, p := range parts {
		body = append(body, p...)
		parts[i] = nil
	}
	return body, nil
}

// Close implements jsonrpc2.ObjectStream. Once closed, the read loop
// dispatches nothing more, even requests already buffered.
func (s *stream) Close() error {
	s.closeOnce.Do(func() { close(s.closedCh) })
	return s.conn.Close()
}

func (s *stream) closed() bool {
	select {
	case <-s.closedCh:
		return true
	default:
		return false
	}
}
