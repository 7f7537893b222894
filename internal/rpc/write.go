package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// WriteObject implements jsonrpc2.ObjectStream.
func (s *stream) WriteObject(obj any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return s.writeBytes(b)
}

func (s *stream) writeBytes(b []byte) error {
	return s.writeOwned(b[:len(b):len(b)]) // b may be shared: no append in place
}

// writeOwned writes one message whose body b the caller hands over: the
// line framing's "\n" goes into b's spare capacity when it has some, so a
// large body is not copied again. (One write(2), not writev: the race
// detector sees an ordering through write and read, not through writev.)
func (s *stream) writeOwned(b []byte) error { return s.writeCounted(b, nil) }

// writeCounted is writeOwned; counted (if not nil) runs once the frame is
// counted in the outbound budget, before it waits for the write lock.
func (s *stream) writeCounted(b []byte, counted func()) error {
	var frame []byte
	if s.framing == FramingHeader {
		hdr := "Content-Length: " + strconv.Itoa(len(b)) + "\r\n\r\n"
		frame = append(append(make([]byte, 0, len(hdr)+len(b)), hdr...), b...)
	} else {
		frame = append(b, '\n')
	}
	if s.budget != nil {
		s.budget.hold(s, len(frame))
	}
	if counted != nil {
		counted()
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.writeFrameLocked(frame)
}

// writeFrameLocked writes frame under wmu. write_timeout measures
// progress: each write gets a fresh deadline, and a write that times out
// having moved some bytes starts a new window; only a whole window with
// no byte written fails. A peer that stopped reading is so closed between
// write_timeout and twice that after its last byte; one that reads slowly
// but steadily is never cut, however long the message.
func (s *stream) writeFrameLocked(frame []byte) error {
	off := 0
	if s.budget != nil {
		s.writing.Store(int64(len(frame)))
		defer func() { s.budget.written(s, len(frame)-off); s.frames.Add(-1); s.writing.Store(0) }() // what failed to go
	}
	for off < len(frame) {
		if s.writeTimeout > 0 {
			s.conn.SetWriteDeadline(time.Now().Add(s.writeTimeout))
		}
		n, err := s.conn.Write(frame[off:min(len(frame), off+writeChunk)])
		off += n
		if s.budget != nil {
			s.budget.written(s, n)
		}
		if err == nil {
			continue
		}
		if n > 0 && isTimeout(err) {
			continue // it moved: a new window
		}
		// A peer that stopped reading: close, so the read loop ends and
		// the connection's holds go through ConnClosed.
		s.setErr(false, fmt.Errorf("write: %w", err))
		s.Close()
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// writeChunk is the most one write call is given: bytes leave the
// outbound count as the kernel takes them, not when a whole large
// message has gone.
const writeChunk = 64 << 10

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
