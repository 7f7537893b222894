package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzStream: whatever bytes arrive, the reader returns objects or an
// error and never panics, never buffers a body over the limit, and a
// batch is answered, not decoded.
func FuzzStream(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize"}` + "\n",
		"Content-Length: 2\r\n\r\n{}",
		"content-length:10\n\n[1,2,3,4]\n",
		"Content-Length: 99999999999999999999\r\n\r\n",
		"C\r\n\r\n",
		"[]\n",
		"\n\n\n{\"a\":1}\n[{\"b\"]\n",
		"Content-Length: 5\r\nContent-Length: 3\r\n\r\n{}  ",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		fr, err := sniff(br)
		if err != nil {
			return
		}
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go io.Copy(io.Discard, b) // batch answers
		s := newStream(a, br, fr, 256, time.Second)
		for i := 0; i < 64; i++ {
			var v json.RawMessage
			if err := s.ReadObject(&v); err != nil {
				if errors.Is(err, ErrTooLarge) && len(data) < 256 && fr == FramingLines {
					t.Fatalf("ErrTooLarge for %d bytes of input", len(data))
				}
				return
			}
			if len(v) > 256 {
				t.Fatalf("decoded %d bytes over the 256-byte limit", len(v))
			}
			if len(v) > 0 && v[0] == '[' {
				t.Fatal("a batch was decoded")
			}
		}
	})
}
