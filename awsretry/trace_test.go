package awsretry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/awsretry"
)

// seen records, in order, what the hooks of RetryOptions were told.
type seen struct {
	mu     sync.Mutex
	events []string
}

func (s *seen) add(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, fmt.Sprintf(format, a...))
}

func (s *seen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.events, "\n")
}

type callMark struct{}

// options returns RetryOptions of every hook kind, each telling s. The
// Trace's CallStart marks the call's context, and each hook reports
// whether it sees the mark.
func (s *seen) options() []retry.Option {
	marked := func(ctx context.Context) string {
		if ctx.Value(callMark{}) == nil {
			return " (unmarked)"
		}
		return ""
	}
	return []retry.Option{
		retry.WithTrace(&retry.Trace{
			CallStart: func(ctx context.Context, scope string) context.Context {
				s.add("call start %s", scope)
				return context.WithValue(ctx, callMark{}, true)
			},
			AttemptStart: func(ctx context.Context, _ string, n int) context.Context {
				s.add("attempt start %d%s", n, marked(ctx))
				return ctx
			},
			AttemptDone: func(ctx context.Context, _ string, n int, err error) {
				s.add("attempt done %d %v%s", n, err != nil, marked(ctx))
			},
			Retry: func(ctx context.Context, _ string, n int, d time.Duration, _ error) {
				s.add("retry %d %v%s", n, d, marked(ctx))
			},
			GiveUp: func(ctx context.Context, _ string, e *retry.Error) {
				s.add("give up %d %v%s", e.Attempts, e.Reason, marked(ctx))
			},
			Done: func(ctx context.Context, _ string, n int, waited time.Duration, err error) {
				s.add("done %d %v %v%s", n, waited, err != nil, marked(ctx))
			},
		}),
		retry.OnAttemptFailed(func(_ context.Context, n int, _ error) { s.add("OnAttemptFailed %d", n) }),
		retry.OnRetry(func(_ context.Context, n int, d time.Duration, _ error) { s.add("OnRetry %d %v", n, d) }),
		retry.OnGiveUp(func(_ context.Context, e *retry.Error) { s.add("OnGiveUp %d", e.Attempts) }),
	}
}

// The hooks and Traces of RetryOptions see every SDK attempt as they would
// an attempt of retry.Do, in Do's order: a DynamoDB call of three failed
// attempts, one whose third attempt succeeds, and an S3 call alike.
func TestHooksSeeEverySDKAttempt(t *testing.T) {
	const fail3 = `call start DynamoDB us-east-1
attempt start 1
attempt done 1 true
OnAttemptFailed 1
OnRetry 1 1ms
retry 1 1ms
attempt start 2
attempt done 2 true
OnAttemptFailed 2
OnRetry 2 1ms
retry 2 1ms
attempt start 3
attempt done 3 true
OnAttemptFailed 3
OnGiveUp 3
give up 3 retry: attempts exhausted
done 3 2ms true`
	const succeed3 = `call start DynamoDB us-east-1
attempt start 1
attempt done 1 true
OnAttemptFailed 1
OnRetry 1 1ms
retry 1 1ms
attempt start 2
attempt done 2 true
OnAttemptFailed 2
OnRetry 2 1ms
retry 2 1ms
attempt start 3
attempt done 3 false
done 3 2ms false`
	for _, tc := range []struct {
		name     string
		failures int64
		s3       bool
		want     string
	}{
		{"three failures", 3, false, fail3},
		{"success on the third attempt", 2, false, succeed3},
		{"S3, three failures", 3, true, strings.Replace(fail3, "DynamoDB", "S3", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, func(w http.ResponseWriter, r *http.Request, n int64) {
				switch {
				case n > tc.failures:
					if tc.s3 {
						fmt.Fprint(w, "body")
						return
					}
					ddbItem(w)
				case tc.s3:
					s3Error(w, 500, "InternalError")
				default:
					ddbError(w, 500, "InternalServerError")
				}
			})
			var got seen
			r := awsretry.New(awsretry.Options{Strategy: fast(), RetryOptions: got.options()})
			var err error
			if tc.s3 {
				_, err = s3c(s, r).GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
			} else {
				err = getItem(context.Background(), ddb(s, r))
			}
			if (err != nil) != (tc.failures >= 3) {
				t.Fatalf("err = %v", err)
			}
			if got.String() != tc.want {
				t.Errorf("the hooks were told\n%s\n\nwant\n%s", got.String(), tc.want)
			}
			if n := s.requests.Load(); n != 3 {
				t.Errorf("requests = %d, want 3", n)
			}
		})
	}
}

// A call the breaker refuses starts and ends for the hooks, with no
// attempt and ErrCircuitOpen, as in retry.Do.
func TestHooksSeeABreakersRefusal(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { ddbError(w, 503, "ServiceUnavailable") })
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Minute})
	c := ddb(s, awsretry.New(awsretry.Options{Strategy: fast(), Breaker: b}))
	for range 10 {
		if err := getItem(context.Background(), c); errors.Is(err, retry.ErrCircuitOpen) {
			break
		}
	}
	var got seen
	c = ddb(s, awsretry.New(awsretry.Options{Strategy: fast(), Breaker: b, RetryOptions: got.options()}))
	sent := s.requests.Load()
	if err := getItem(context.Background(), c); !errors.Is(err, retry.ErrCircuitOpen) || s.requests.Load() != sent {
		t.Fatalf("err = %v, requests %d -> %d: want ErrCircuitOpen and none sent", err, sent, s.requests.Load())
	}
	want := "call start DynamoDB us-east-1\nOnGiveUp 0\ngive up 0 retry: circuit open, attempt not made\ndone 0 0s true"
	if got.String() != want {
		t.Errorf("the hooks were told\n%s\n\nwant\n%s", got.String(), want)
	}
}

// A BeforeRetry among RetryOptions that refuses a retry stops the SDK's:
// one request, the refusal in the call's error as its Reason, and a retry
// refused so costs the quota nothing.
func TestBeforeRetryVetoesTheSDKRetry(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { ddbError(w, 500, "InternalServerError") })
	errVeto := errors.New("the caller's own limit")
	q := retry.NewTokenBucket(500)
	st := retry.NewStandard(retry.StandardOptions{Bucket: q, Backoff: retry.Constant(time.Millisecond)})
	var asked []int
	c := ddb(s, awsretry.New(awsretry.Options{Strategy: st, RetryOptions: []retry.Option{
		retry.BeforeRetry(func(_ context.Context, n int, err error) error {
			asked = append(asked, n)
			return errVeto
		}),
	}}))
	err := getItem(context.Background(), c)
	var re *retry.Error
	if !errors.Is(err, errVeto) || !errors.As(err, &re) || re.Reason != errVeto || re.Attempts != 1 {
		t.Fatalf("err = %v, want the veto as the Reason after 1 attempt", err)
	}
	if n := s.requests.Load(); n != 1 || len(asked) != 1 || asked[0] != 1 {
		t.Fatalf("requests = %d, BeforeRetry asked after attempts %v: want 1 and [1]", n, asked)
	}
	if got := q.Available(); got != 500 {
		t.Fatalf("quota = %d, want 500", got)
	}
}

// A hook that panics, wherever it is called, leaves no token held: the
// panic reaches the caller of the SDK, a retry that will not be made gives
// its cost back to the quota (one that was made keeps it, as without the
// panic), and the next call goes as if nothing had happened.
func TestPanickingHookHoldsNoToken(t *testing.T) {
	boom := func() { panic("hook") }
	for _, tc := range []struct {
		name string
		opt  func(*bool) retry.Option // the hook that panics once *armed
		made bool                     // it panics after the retry was made
	}{
		{"AttemptStart", func(armed *bool) retry.Option {
			return retry.WithTrace(&retry.Trace{AttemptStart: func(ctx context.Context, _ string, n int) context.Context {
				if *armed && n == 2 {
					boom()
				}
				return ctx
			}})
		}, false},
		{"AttemptDone", func(armed *bool) retry.Option {
			return retry.OnAttemptFailed(func(context.Context, int, error) {
				if *armed {
					boom()
				}
			})
		}, false},
		{"BeforeRetry", func(armed *bool) retry.Option {
			return retry.BeforeRetry(func(context.Context, int, error) error {
				if *armed {
					boom()
				}
				return nil
			})
		}, false},
		{"Retry", func(armed *bool) retry.Option {
			return retry.OnRetry(func(context.Context, int, time.Duration, error) {
				if *armed {
					boom()
				}
			})
		}, false},
		{"GiveUp", func(armed *bool) retry.Option {
			return retry.OnGiveUp(func(context.Context, *retry.Error) {
				if *armed {
					boom()
				}
			})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
				if firstAttemptOf(r) {
					ddbError(w, 500, "InternalServerError")
					return
				}
				ddbError(w, 503, "ServiceUnavailable")
			})
			run := func(armed *bool) (*dynamodb.Client, *retry.TokenBucket) {
				q := retry.NewTokenBucket(500)
				st := retry.NewStandard(retry.StandardOptions{Bucket: q, MaxAttempts: 2, Backoff: retry.Constant(time.Millisecond)})
				return ddb(s, awsretry.New(awsretry.Options{Strategy: st, RetryOptions: []retry.Option{tc.opt(armed)}})), q
			}
			want := 500
			if tc.made {
				unarmed := false
				c, q := run(&unarmed)
				_ = getItem(context.Background(), c)
				want = q.Available()
			}
			armed := true
			c, q := run(&armed)
			func() {
				defer func() {
					if p := recover(); p != "hook" {
						t.Errorf("recovered %v, want the hook's panic", p)
					}
				}()
				_ = getItem(context.Background(), c)
			}()
			if got := q.Available(); got != want {
				t.Errorf("quota after the panic = %d, want %d: a token is held", got, want)
			}
			armed = false
			err := getItem(context.Background(), c)
			var re *retry.Error
			if !errors.As(err, &re) || re.Attempts != 2 {
				t.Errorf("the next call: %v, want two attempts and a give-up", err)
			}
		})
	}
}

// A caller that gives up during the SDK's wait before a retry leaves no
// token held: the SDK makes no attempt and tells the retryer nothing more,
// yet the retry's cost goes back to the quota, and the hooks hear the call
// end (the retry they saw start ends with the caller's error).
func TestCallerGivingUpInTheWaitHoldsNoToken(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { ddbError(w, 500, "InternalServerError") })
	q := retry.NewTokenBucket(500)
	st := retry.NewStandard(retry.StandardOptions{Bucket: q, Backoff: retry.Constant(time.Minute)})
	var got seen
	c := ddb(s, awsretry.New(awsretry.Options{Strategy: st, RetryOptions: got.options()[:1]}))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if err := getItem(ctx, c); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the caller's cancellation", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(got.String(), "\ndone ") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	want := `call start DynamoDB us-east-1
attempt start 1
attempt done 1 true
retry 1 1m0s
attempt start 2
attempt done 2 true
give up 1 context canceled
done 1 0s true`
	if got.String() != want {
		t.Errorf("the hooks were told\n%s\n\nwant\n%s", got.String(), want)
	}
	if n := s.requests.Load(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
	if a := q.Available(); a != 500 {
		t.Errorf("quota = %d, want 500: the retry's token is held", a)
	}
}
