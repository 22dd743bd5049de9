package httpretry

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
)

// TestHostNamesCannotDodgeTheDefaultStrategy: requests spread over 20,000
// host names of one failing service each open a scope of their own in a
// zero-value Transport's strategy. Per-host limits alone would give each a
// fresh allowance (close to 3x the load in an outage); the default strategy
// also judges the service across scopes, so the load stays near 1x.
func TestHostNamesCannotDodgeTheDefaultStrategy(t *testing.T) {
	var served atomic.Int64
	// The service, reached through a proxy so that every host name shares
	// one connection pool: it answers every request, whatever its host,
	// with 503.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	proxy, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	base := &http.Transport{Proxy: http.ProxyURL(proxy)}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: &Transport{Base: base}}

	const hosts = 20000
	for i := range hosts {
		resp, err := client.Get(fmt.Sprintf("http://h%d.service.test/", i))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	amplification := float64(served.Load()) / hosts
	t.Logf("%d requests over %d host names: %d attempts, %.3fx", hosts, hosts, served.Load(), amplification)
	if amplification > 1.2 {
		t.Fatalf("amplification %.3fx over %d host names, want at most 1.2x", amplification, hosts)
	}
}
