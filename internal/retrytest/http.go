package retrytest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Request is what a Server recorded of one request.
type Request struct {
	Method string
	Body   string
	Header http.Header
}

// Server is a loopback HTTP server whose handler is told the request's
// number (1 for the first) and which records every request it sees and
// counts the connections it accepts.
type Server struct {
	*httptest.Server
	Conns atomic.Int32 // connections opened

	mu   sync.Mutex
	reqs []Request
}

// NewServer starts a Server on loopback for the rest of the test. It must be
// called outside any synctest bubble: its goroutines run in real time.
func NewServer(t testing.TB, h func(n int, w http.ResponseWriter, r *http.Request)) *Server {
	t.Helper()
	s := &Server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, Request{r.Method, string(body), r.Header.Clone()})
		n := len(s.reqs)
		s.mu.Unlock()
		h(n, w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.Conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// Requests are the requests the server has seen, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Reset forgets the requests seen: the next is number 1 again.
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
}

// DeadAddr returns a loopback address nothing listens on: a dial to it is
// refused.
func DeadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
