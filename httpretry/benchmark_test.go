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

// canned answers every request at once with the same small response: with
// no network in the way, BenchmarkOverhead measures the Transport's own work.
type canned struct{}

func (canned) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

func BenchmarkOverhead(b *testing.B) {
	req, _ := http.NewRequest("GET", "http://example.invalid/", nil)
	for _, tc := range []struct {
		name string
		rt   http.RoundTripper
	}{{"base", canned{}}, {"httpretry", &Transport{Base: canned{}}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := tc.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
