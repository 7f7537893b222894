package rpc

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Why a connection ended: the `reason` of its one log line
// (docs/operations.md "Why a connection closed"). Stable strings: ops
// scripts grep for them.
const (
	// The peer's doing, not a fault (logged at info).
	reasonPeerClosed = "peer_closed"      // EOF between messages; EPIPE: it closed (or stopped reading) while we wrote
	reasonReset      = "connection_reset" // ECONNRESET: it closed with our output unread (Unix sockets), or a reset
	// The daemon closed it itself (shutdown, upgrade); logged at debug.
	reasonClosed = "closed"
	// Faults of the peer's input (logged at warn, counted as framingFaults).
	reasonBadFraming   = "bad_framing"
	reasonBatchOpen    = "batch_not_supported"
	reasonTooLarge     = "message_too_large"
	reasonBadHeader    = "bad_header"
	reasonTruncated    = "truncated_frame" // EOF inside a message
	reasonMalformed    = "malformed_json"
	reasonInitTimeout  = "initialize_timeout"
	reasonFrameStalled = "frame_stalled"
	// The socket failed otherwise (logged at warn with the error).
	reasonReadError    = "read_error"
	reasonWriteError   = "write_error"
	reasonWriteTimeout = "write_timeout"
)

// readReason names why reading a connection ended; timeout names a read
// deadline that ended it (admit.go: initialize_timeout or frame_stalled).
// The socket's own errors come first: a reset in the middle of a message
// is a reset, not a malformed one.
func readReason(err error, timeout func() string) string {
	switch {
	case err == nil, errors.Is(err, net.ErrClosed):
		return reasonClosed
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED):
		return reasonReset
	case errors.Is(err, syscall.EPIPE):
		return reasonPeerClosed
	case errors.Is(err, os.ErrDeadlineExceeded):
		return timeout()
	case errors.Is(err, ErrTooLarge):
		return reasonTooLarge
	case errors.Is(err, ErrBadHeader):
		return reasonBadHeader
	case errors.Is(err, ErrTruncated), errors.Is(err, io.ErrUnexpectedEOF):
		return reasonTruncated
	case errors.Is(err, ErrBatchOpen):
		return reasonBatchOpen
	case errors.Is(err, ErrBadFraming):
		return reasonBadFraming
	case errors.Is(err, io.EOF):
		return reasonPeerClosed
	case errors.Is(err, ErrMalformed), isJSONError(err):
		return reasonMalformed
	}
	return reasonReadError
}

// writeReason names why writing to a connection failed.
func writeReason(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return reasonWriteTimeout
	case errors.Is(err, net.ErrClosed):
		return reasonClosed
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED):
		return reasonReset
	case errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrClosedPipe):
		return reasonPeerClosed
	}
	return reasonWriteError
}

func isJSONError(err error) bool {
	_, syntax := errors.AsType[*json.SyntaxError](err)
	_, typ := errors.AsType[*json.UnmarshalTypeError](err)
	return syntax || typ
}

// framingFault reports whether reason is a fault of the peer's input
// (counted in daemon.stats framingFaults).
func framingFault(reason string) bool {
	switch reason {
	case reasonBadFraming, reasonBatchOpen, reasonTooLarge, reasonBadHeader, reasonTruncated,
		reasonMalformed, reasonInitTimeout, reasonFrameStalled:
		return true
	}
	return false
}
