package httpretry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// BenchmarkOverhead measures the Transport's own work on the success path:
// a GET, a PUT with an in-memory body as http.NewRequest makes it, and a PUT
// with a streamed body and a GetBody, whose reads the Transport watches.
// The canned base never reads a body, so that one request serves every
// iteration.
func BenchmarkOverhead(b *testing.B) {
	get, _ := http.NewRequest("GET", "http://example.invalid/", nil)
	put, _ := http.NewRequest("PUT", "http://example.invalid/", strings.NewReader("payload"))
	stream, _ := http.NewRequest("PUT", "http://example.invalid/", nil)
	stream.GetBody = func() (io.ReadCloser, error) {
		return io.NopCloser(struct{ io.Reader }{strings.NewReader("payload")}), nil
	}
	stream.Body, _ = stream.GetBody()
	for _, tc := range []struct {
		name string
		rt   http.RoundTripper
		req  *http.Request
	}{
		{"base", canned{}, get},
		{"httpretry", &Transport{Base: canned{}}, get},
		{"base-PUT", canned{}, put},
		{"httpretry-PUT", &Transport{Base: canned{}}, put},
		{"base-PUT-stream", canned{}, stream},
		{"httpretry-PUT-stream", &Transport{Base: canned{}}, stream},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := tc.rt.RoundTrip(tc.req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
