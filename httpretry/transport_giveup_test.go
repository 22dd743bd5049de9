package httpretry

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/retrytest"
)

// errUnreadable is what a request body that cannot be read returns.
var errUnreadable = errors.New("disk on fire")

type unreadable struct{}

func (unreadable) Read([]byte) (int, error) { return 0, errUnreadable }

// Every error the Transport returns when it stops is a *retry.Error with the
// attempts it made and the reason, whichever way it stops: without an
// initial token, with retries off, and before the first attempt when the
// body that would be buffered for replay cannot be read.
func TestEveryGiveUpIsARetryError(t *testing.T) {
	dead := "http://" + retrytest.DeadAddr(t) + "/"
	for _, tc := range []struct {
		name     string
		tr       *Transport
		body     io.Reader
		attempts int
		reason   error
		last     error
	}{
		{"no initial token", &Transport{Strategy: &noInitial{}}, nil, 1, errNoToken, nil},
		{"retries off", &Transport{Retries: -1}, nil, 1, retry.ErrMaxAttempts, nil},
		{"unreadable body", &Transport{Strategy: noWait(), BufferBody: 1 << 10}, unreadable{}, 0, errBodyUnread, errUnreadable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err, rep := send(t, tc.tr, context.Background(), "PUT", dead, tc.body)
			if resp != nil {
				t.Fatalf("a response: %d", resp.StatusCode)
			}
			var re *retry.Error
			if !errors.As(err, &re) {
				t.Fatalf("err = %v (%T), want a *retry.Error", err, err)
			}
			if re.Attempts != tc.attempts || rep.Attempts != tc.attempts || !errors.Is(re.Reason, tc.reason) || !errors.Is(rep.Reason, tc.reason) {
				t.Fatalf("attempts %d (report %d), reason %v (report %v)", re.Attempts, rep.Attempts, re.Reason, rep.Reason)
			}
			if tc.last != nil && !errors.Is(err, tc.last) {
				t.Fatalf("err = %v, want it to wrap %v", err, tc.last)
			}
		})
	}
}
