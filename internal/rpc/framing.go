package rpc

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
)

// Framing is how JSON-RPC messages are delimited on one connection.
type Framing int

// Framings: newline-delimited JSON (scripts) and Content-Length headers
// (LSP / vscode-jsonrpc).
const (
	FramingLines Framing = iota
	FramingHeader
)

var framingNames = [...]string{FramingLines: "lines", FramingHeader: "header"}

func (f Framing) String() string {
	if int(f) < len(framingNames) {
		return framingNames[f]
	}
	return "framing(" + strconv.Itoa(int(f)) + ")"
}

// Framing faults; each closes the connection.
var (
	// ErrBadFraming: the first non-blank byte is neither '{' nor 'C'/'c'.
	ErrBadFraming = errors.New("unrecognised framing")
	// ErrBatchOpen: the connection opened with a batch ('[').
	ErrBatchOpen = errors.New("connection opened with a batch")
	// ErrTooLarge: a message is larger than max_message_bytes.
	ErrTooLarge = errors.New("message larger than max_message_bytes")
	// ErrBadHeader: a header line that is not "Name: value", or no Content-Length.
	ErrBadHeader = errors.New("bad message header")
	// ErrTruncated: the stream ended inside a message.
	ErrTruncated = errors.New("truncated message")
	// ErrMalformed: a message is not valid JSON-RPC.
	ErrMalformed = errors.New("malformed JSON")
)

const (
	maxHeaderLine  = 4096
	maxHeaderLines = 32
)

func isBlank(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

// sniff skips blanks and names the framing from the first byte.
func sniff(br *bufio.Reader) (Framing, error) {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return 0, err
		}
		switch c := b[0]; {
		case isBlank(c):
			br.ReadByte()
		case c == '{':
			return FramingLines, nil
		case c == 'C' || c == 'c':
			return FramingHeader, nil
		case c == '[':
			return 0, ErrBatchOpen
		default:
			return 0, fmt.Errorf("first byte %q: %w", c, ErrBadFraming)
		}
	}
}
