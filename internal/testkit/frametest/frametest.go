// Package frametest reads one JSON-RPC message off a raw connection, for
// the tests that write hand-framed (and malformed) bytes to the daemon's
// socket and read what comes back: a reader of its own, so a fault in
// package rpc's framing cannot hide itself in the tests of it. Import it
// only from _test.go files.
package frametest

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Read reads one message's bytes: with header, a block of header lines
// ended by an empty line, then Content-Length bytes of body; without, one
// line (its newline kept).
func Read(br *bufio.Reader, header bool) ([]byte, error) {
	if !header {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("read line: %w", err)
		}
		return line, nil
	}
	n := -1
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("read header: %w", err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	if n < 0 {
		return nil, fmt.Errorf("read header: no Content-Length")
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return body, nil
}

// Frame is msg framed as Read reads it: after a Content-Length header with
// header, else as a line.
func Frame(msg string, header bool) string {
	if header {
		return "Content-Length: " + strconv.Itoa(len(msg)) + "\r\n\r\n" + msg
	}
	return msg + "\n"
}
