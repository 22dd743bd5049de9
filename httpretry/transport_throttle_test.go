package httpretry

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// One 429 among successes, a second into a client's life, cuts what the
// zero Transport completes to about 0.7 times what it was sending (the
// CUBIC beta of its send-rate limiter), not to a tenth: the limiter
// measures the rate the client sent in the last moments, not the window's
// attempts spread over a window the client has not lived yet. In virtual
// time, against a real server on loopback: 8 workers, each sending a
// request every 20 ms, 400 a second.
func TestOneThrottleKeepsMostOfTheThroughput(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 400 { // about a second in
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	})
	virtual(t, func(t *testing.T, base *http.Transport) {
		c := &http.Client{Transport: &Transport{Base: base}}
		const (
			step = 500 * time.Millisecond
			run  = 4 * time.Second
		)
		var (
			mu     sync.Mutex
			counts = make([]int, run/step)
			wg     sync.WaitGroup
		)
		start := time.Now()
		for range 8 {
			wg.Go(func() {
				for time.Since(start) < run {
					resp, err := c.Get(srv.URL)
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							mu.Lock()
							if i := int(time.Since(start) / step); i < len(counts) {
								counts[i]++
							}
							mu.Unlock()
						}
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		t.Logf("requests completed per 500 ms: %v", counts)
		before := counts[1] // the half second before the 429
		for i := 2; i < len(counts); i++ {
			if 2*counts[i] < before {
				t.Fatalf("%d requests in the 500 ms from %v, %d in the half second before the 429: cut below half (%v)",
					counts[i], time.Duration(i)*step, before, counts)
			}
		}
	})
}
