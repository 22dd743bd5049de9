package httpretry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkRoundTrip measures the success path on loopback: one GET, one 200
// with a small body, read and closed, through a bare http.Transport and
// through a Transport on top of it.
func BenchmarkRoundTrip(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	run := func(b *testing.B, rt http.RoundTripper) {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		b.ReportAllocs()
		for b.Loop() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("bare", func(b *testing.B) {
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		run(b, base)
	})
	b.Run("httpretry", func(b *testing.B) {
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		run(b, &Transport{Base: base})
	})
}
