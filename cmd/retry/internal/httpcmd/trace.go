package httpcmd

import (
	"context"
	"crypto/tls"
	"net"
	"net/http/httptrace"
	"sync"
	"time"
)

// connTimes are the times and addresses -w reports of an attempt, as curl's
// time_* variables: each from the attempt's start.
type connTimes struct {
	dns, connect, tls, ready, firstByte time.Duration
	remoteIP, remotePort                string
	localIP, localPort                  string
}

// connTrace records connTimes for the last attempt a context carries.
type connTrace struct {
	mu    sync.Mutex
	start time.Time
	t     connTimes
}

// with returns ctx with a trace that records every attempt made with it,
// each starting afresh, so that the last one's times are what is left.
func (c *connTrace) with(ctx context.Context) context.Context {
	since := func(set func(time.Duration)) {
		c.mu.Lock()
		defer c.mu.Unlock()
		set(time.Since(c.start))
	}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.start, c.t = time.Now(), connTimes{}
		},
		DNSDone:              func(httptrace.DNSDoneInfo) { since(func(d time.Duration) { c.t.dns = d }) },
		ConnectDone:          func(_, _ string, _ error) { since(func(d time.Duration) { c.t.connect = d }) },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { since(func(d time.Duration) { c.t.tls = d }) },
		GotFirstResponseByte: func() { since(func(d time.Duration) { c.t.firstByte = d }) },
		GotConn: func(info httptrace.GotConnInfo) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.t.ready = time.Since(c.start) // the request is about to go: curl's pretransfer
			c.t.remoteIP, c.t.remotePort = splitAddr(info.Conn.RemoteAddr())
			c.t.localIP, c.t.localPort = splitAddr(info.Conn.LocalAddr())
		},
	})
}

// times returns the last attempt's times.
func (c *connTrace) times() connTimes {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func splitAddr(a net.Addr) (ip, port string) {
	ip, port, _ = net.SplitHostPort(a.String())
	return ip, port
}
