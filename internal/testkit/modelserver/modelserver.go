// Package modelserver is the skeleton of the scripted model APIs the
// real-provider tests point a CLI at: an HTTP server on 127.0.0.1, a script
// of replies taken in order, the bodies of the requests that took one, a
// signal per such request, and a Server-Sent Events writer. What a request
// and a reply look like on the wire (the Messages API, the responses API)
// stays with each provider's test package (claudetest, codextest), which
// embeds a Server in its Model. It is imported only by those packages.
package modelserver

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// Server holds a script of replies of type R.
type Server[R any] struct {
	URL string // http://127.0.0.1:PORT, then the path given to Start

	mu      sync.Mutex
	script  []R
	bodies  []json.RawMessage
	headers []http.Header
	arrived chan struct{}
	srv     *http.Server
}

// New is a server holding replies; Start serves it.
func New[R any](replies []R) *Server[R] {
	return &Server[R]{script: replies, arrived: make(chan struct{}, 1024)}
}

// Start listens on 127.0.0.1 and serves h; path is appended to URL.
func (s *Server[R]) Start(path string, h http.HandlerFunc) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	s.URL = "http://" + ln.Addr().String() + path
	s.srv = &http.Server{Handler: h}
	go s.srv.Serve(ln)
	return nil
}

// Close stops the server.
func (s *Server[R]) Close() { s.srv.Close() }

// Push appends replies to the script.
func (s *Server[R]) Push(replies ...R) {
	s.mu.Lock()
	s.script = append(s.script, replies...)
	s.mu.Unlock()
}

// Take records a request's body and returns the script's next reply
// (fallback once it is used up) and how many requests took one so far,
// this one included; Arrived gets a value.
func (s *Server[R]) Take(body []byte, fallback R) (R, int) { return s.TakeFrom(nil, body, fallback) }

// TakeFrom is Take that also records the request's headers (Headers).
func (s *Server[R]) TakeFrom(h http.Header, body []byte, fallback R) (R, int) {
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, h.Clone())
	rep := fallback
	if len(s.script) > 0 {
		rep, s.script = s.script[0], s.script[1:]
	}
	n := len(s.bodies)
	s.mu.Unlock()
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	return rep, n
}

// Bodies returns the bodies of the requests that took a reply so far.
func (s *Server[R]) Bodies() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]json.RawMessage(nil), s.bodies...)
}

// Headers returns the headers of the requests that took a reply so far,
// in the order of Bodies (nil for one taken without them).
func (s *Server[R]) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// Credential is the credential a request carried: its Authorization
// header (codex: "Bearer KEY"), else its x-api-key (the Messages API).
func Credential(h http.Header) string {
	if a := h.Get("Authorization"); a != "" {
		return a
	}
	return h.Get("X-Api-Key")
}

// Arrived gets one value per request that took a reply (buffered).
func (s *Server[R]) Arrived() <-chan struct{} { return s.arrived }

// SSE writes Server-Sent Events, each flushed at once.
type SSE struct{ W http.ResponseWriter }

// Begin answers 200 with Content-Type text/event-stream.
func (s SSE) Begin() {
	s.W.Header().Set("Content-Type", "text/event-stream")
	s.W.WriteHeader(http.StatusOK)
}

// Send writes one event of type typ whose data is v as JSON.
func (s SSE) Send(typ string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.W, "event: %s\ndata: %s\n\n", typ, b)
	if f, ok := s.W.(http.Flusher); ok {
		f.Flush()
	}
}
