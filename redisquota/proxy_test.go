package redisquota_test

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowProxy forwards TCP connections on loopback to a Redis, holding each
// piece of Redis's answers for a delay that the test can change: a Redis
// far away, or slow to answer.
type slowProxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // time.Duration
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// newSlowProxy starts a proxy to target, stopped with the test.
func newSlowProxy(t testing.TB, target string, delay time.Duration) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, target: target}
	p.delay.Store(int64(delay))
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *slowProxy) Addr() string { return p.ln.Addr().String() }

// setDelay changes the delay of the answers from now on.
func (p *slowProxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *slowProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() {
			_, _ = io.Copy(out, in)
			out.Close()
		})
		p.wg.Go(func() {
			defer in.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := out.Read(buf)
				if n > 0 {
					time.Sleep(time.Duration(p.delay.Load()))
					if _, err := in.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}

func (p *slowProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
