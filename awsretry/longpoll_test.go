package awsretry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/awsretry"
)

// failing answers every request with a 500 in AWS's JSON 1.0 protocol,
// which SQS and DynamoDB speak.
func failing(w http.ResponseWriter, _ *http.Request, _ int64) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(500)
	fmt.Fprint(w, `{"__type":"com.amazonaws.sqs#InternalFailure","message":"InternalFailure from the test service"}`)
}

// inBubble returns an HTTP client for a synctest bubble: it keeps no idle
// connection, whose reader, waiting on a real socket, would stop the
// bubble's clock.
func inBubble() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// ddbInBubble returns a DynamoDB client of s with retryer r and the
// SDK's RetryMaxAttempts, for a synctest bubble.
func ddbInBubble(s *service, r aws.Retryer, maxAttempts int) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(s.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer:          r,
		HTTPClient:       inBubble(),
		RetryMaxAttempts: maxAttempts,
	})
}

// sqsc returns an SQS client of s with retryer r.
func sqsc(s *service, r aws.Retryer, hc *http.Client) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer:      r,
		HTTPClient:   hc,
	})
}

func receive(ctx context.Context, c *sqs.Client) error {
	_, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String("https://sqs.us-east-1.amazonaws.com/123456789012/q")})
	return err
}

// A consumer polling SQS in a loop while the quota refuses every retry:
// each ReceiveMessage makes its one attempt, then waits the backoff its
// refused retry would have had before it fails, so that the loop polls at
// the backoff's pace; before, each failed at once and the loop sent its
// first attempts as fast as it ran. A call that does not poll (DynamoDB's
// GetItem) fails at once, as before; Options.LongPoll decides otherwise
// both ways.
func TestLongPollWaitsTheRefusedRetrysBackoff(t *testing.T) {
	const (
		polls   = 5
		backoff = 2 * time.Second
	)
	s := newService(t, failing)
	run := func(t *testing.T, longPoll func(context.Context) bool, call func(context.Context, *http.Client, aws.Retryer) error) (time.Duration, int64) {
		var elapsed time.Duration
		before := s.requests.Load()
		synctest.Test(t, func(t *testing.T) {
			st := retry.NewStandard(retry.StandardOptions{Capacity: 1, Backoff: retry.Constant(backoff)}) // no retry's cost fits
			r := awsretry.New(awsretry.Options{Strategy: st, LongPoll: longPoll})
			hc := inBubble()
			start := time.Now()
			for i := range polls {
				if err := call(t.Context(), hc, r); !errors.Is(err, retry.ErrQuotaExhausted) {
					t.Fatalf("call %d: %v, want the quota's refusal", i+1, err)
				}
			}
			elapsed = time.Since(start)
		})
		return elapsed, s.requests.Load() - before
	}
	receiving := func(ctx context.Context, hc *http.Client, r aws.Retryer) error { return receive(ctx, sqsc(s, r, hc)) }
	getting := func(ctx context.Context, _ *http.Client, r aws.Retryer) error {
		return getItem(ctx, ddbInBubble(s, r, 0))
	}
	always := func(context.Context) bool { return true }
	never := func(context.Context) bool { return false }
	for _, c := range []struct {
		name     string
		longPoll func(context.Context) bool
		call     func(context.Context, *http.Client, aws.Retryer) error
		want     time.Duration
	}{
		{"SQS ReceiveMessage", nil, receiving, polls * backoff},
		{"DynamoDB GetItem", nil, getting, 0},
		{"GetItem said to poll", always, getting, polls * backoff},
		{"ReceiveMessage said not to poll", never, receiving, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			elapsed, requests := run(t, c.longPoll, c.call)
			if elapsed != c.want || requests != polls {
				t.Fatalf("%d calls took %v and sent %d requests, want %v and %d", polls, elapsed, requests, c.want, polls)
			}
		})
	}
}

// A consumer polling SQS while the breaker's circuit is open: a
// ReceiveMessage refused before its first attempt, or after it, returns
// only once the circuit may let an attempt through (RefusedFor is 0), or
// at its deadline, and sends nothing while it waits.
func TestLongPollWaitsOutTheOpenCircuit(t *testing.T) {
	const openFor = 5 * time.Second
	s := newService(t, failing)
	synctest.Test(t, func(t *testing.T) {
		b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 1, OpenFor: openFor})
		st := retry.NewStandard(retry.StandardOptions{Backoff: retry.Constant(time.Second)})
		c := sqsc(s, awsretry.New(awsretry.Options{Strategy: st, Breaker: b}), inBubble())
		const scope = "SQS us-east-1"

		// Its first attempt fails, and opens the circuit: the retry,
		// whose 1 s wait ends before the circuit's 5 s, is refused, and
		// the call waits the 5 s.
		start := time.Now()
		err := receive(t.Context(), c)
		if !errors.Is(err, retry.ErrCircuitOpen) || time.Since(start) != openFor || s.requests.Load() != 1 {
			t.Fatalf("the call that opened the circuit: %v after %v and %d requests, want ErrCircuitOpen after %v and 1", err, time.Since(start), s.requests.Load(), openFor)
		}
		if d := b.RefusedFor(scope); d != 0 {
			t.Fatalf("the call returned while the circuit refuses for %v more", d)
		}

		// Half-open, its probe out: a second poller, refused before its
		// first attempt, waits until the probe's place is free again.
		probe, err := b.Allow(scope)
		if err != nil {
			t.Fatal(err)
		}
		defer probe.Release()
		wait := b.RefusedFor(scope)
		start = time.Now()
		err = receive(t.Context(), c)
		if !errors.Is(err, retry.ErrCircuitOpen) || time.Since(start) != wait || s.requests.Load() != 1 {
			t.Fatalf("refused by the probe's circuit: %v after %v and %d requests, want ErrCircuitOpen after %v and none sent", err, time.Since(start), s.requests.Load(), wait)
		}

		// Refused with a deadline nearer than the circuit's end: it
		// returns at the deadline.
		reprobe, err := b.Allow(scope)
		if err != nil {
			t.Fatalf("the circuit refused after RefusedFor's wait: %v", err)
		}
		reprobe.Done(t.Context(), retry.Transient(errors.New("the probe failed"))) // open again, for longer
		if b.Delay(scope) <= time.Second {
			t.Fatalf("the failed probe left the circuit open for %v, want more than the deadline's 1 s", b.Delay(scope))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		err = receive(ctx, c)
		if waited := time.Since(start); !errors.Is(err, retry.ErrCircuitOpen) || waited != time.Second || s.requests.Load() != 1 {
			t.Fatalf("refused with a 1 s deadline: %v after %v, want a refusal at the deadline", err, waited)
		}
	})
}

// delayedFirst is a strategy whose first attempts wait d, as Adaptive's
// send-rate limiter makes them wait after throttling.
type delayedFirst struct {
	*retry.Standard
	d time.Duration
}

func (s delayedFirst) AcquireInitialToken(string) (retry.Token, error) {
	return retry.NewToken(0, s.d, nil), nil
}

// A polling call whose next wait would end past its deadline (a retry
// granted, or a first attempt the send-rate limiter holds back) waits until
// the deadline before it fails, rather than polling again at once (as
// retry.LongPoll); one that does not poll fails at once, as before.
func TestLongPollWaitsUntilTheDeadlineAWaitMisses(t *testing.T) {
	s := newService(t, failing)
	for _, w := range []struct {
		name     string
		strategy func() retry.Strategy
		requests int64
	}{
		{"a retry's", func() retry.Strategy {
			return retry.NewStandard(retry.StandardOptions{Backoff: retry.Constant(2 * time.Second)})
		}, 1},
		{"a first attempt's", func() retry.Strategy {
			return delayedFirst{retry.NewStandard(retry.StandardOptions{}), 2 * time.Second}
		}, 0},
	} {
		for _, c := range []struct {
			name string
			poll bool
			want time.Duration
		}{{"SQS ReceiveMessage", true, time.Second}, {"DynamoDB GetItem", false, 0}} {
			t.Run(w.name+", "+c.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := awsretry.New(awsretry.Options{Strategy: w.strategy()})
					ctx, cancel := context.WithTimeout(t.Context(), time.Second)
					defer cancel()
					before := s.requests.Load()
					start := time.Now()
					var err error
					if c.poll {
						err = receive(ctx, sqsc(s, r, inBubble()))
					} else {
						err = getItem(ctx, ddbInBubble(s, r, 0))
					}
					sent := s.requests.Load() - before
					if waited := time.Since(start); !errors.Is(err, retry.ErrDeadline) || waited != c.want || sent != w.requests {
						t.Fatalf("%v after %v and %d requests, want ErrDeadline after %v and %d", err, waited, sent, c.want, w.requests)
					}
				})
			})
		}
	}
}
