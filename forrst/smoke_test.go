package forrst

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestSmokeUnavailableTwiceThenSuccess(t *testing.T) {
	var calls atomic.Int32
	var s Server
	s.Register("flaky", func(ctx context.Context, args json.RawMessage) (any, error) {
		if calls.Add(1) <= 2 {
			return nil, Fail(CodeUnavailable, "try later")
		}
		return map[string]string{"ok": "yes"}, nil
	})
	srv := httptest.NewServer(&s)
	defer srv.Close()
	synctest.Test(t, func(t *testing.T) {
		base := &http.Transport{DisableKeepAlives: true}
		defer base.CloseIdleConnections()
		c := &Client{URL: srv.URL, HTTPClient: &http.Client{Transport: base}}
		start := time.Now()
		var out map[string]string
		if err := c.Call(context.Background(), "flaky", nil, &out); err != nil {
			t.Fatal(err)
		}
		if out["ok"] != "yes" || calls.Load() != 3 || time.Since(start) != 3*time.Second {
			t.Fatalf("out %v, calls %d, after %v", out, calls.Load(), time.Since(start))
		}
	})
}
