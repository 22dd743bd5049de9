package awsretry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/awsretry"
)

// quotaExceeded reports whether err is the SDK's refusal for want of a
// retry token (its ratelimit.QuotaExceededError).
func quotaExceeded(err error) bool {
	var qe ratelimit.QuotaExceededError
	return errors.As(err, &qe)
}

// A brownout is a service that fails a third of attempts, and every call
// within three: counted per table by their first attempts, of every 6 calls
// the 3rd and the 6th fail their first attempt with a 503, and the 6th its
// second too, with a reset; every other attempt is answered. The pattern is
// the calls', whatever the order their attempts arrive in.
type brownout struct {
	mu    sync.Mutex
	calls map[string]int64     // by table: calls seen
	seen  map[string]*[2]int64 // by the SDK's invocation id: the call's number, attempts seen
}

func newBrownout(t testing.TB) *service {
	b := &brownout{calls: map[string]int64{}, seen: map[string]*[2]int64{}}
	return newService(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		table, id := tableOf(r), r.Header.Get("Amz-Sdk-Invocation-Id")
		b.mu.Lock()
		c := b.seen[id]
		if c == nil {
			b.calls[table]++
			c = &[2]int64{b.calls[table], 0}
			b.seen[id] = c
		}
		c[1]++
		n, attempt := c[0], c[1]
		b.mu.Unlock()
		switch {
		case attempt == 1 && n%3 == 0:
			ddbError(w, 503, "ServiceUnavailable")
		case attempt == 2 && n%6 == 0:
			reset(w)
		default:
			ddbItem(w)
		}
	})
}

// 64 goroutines on one client in a brownout, every call of which succeeds
// within three attempts, never fail for want of a token with the default
// Retryer: it has no token bucket to drain. The SDK's standard retryer,
// with its quota as shipped (500 tokens, 14 a retry, one back for a
// success at the first attempt, a successful retry's cost back), fails
// calls with "retry quota exceeded" in the same run
// (aws/aws-sdk-go-v2#1665), whatever order the calls' attempts come in:
// of 512 calls, the 85 whose first retry fails each keep 14 tokens for
// good if they succeed, 1190 in all, where the bucket holds 500 and the
// 342 successes at the first attempt add at most 342: at least 25 of them
// fail for want of a token.
//
// The default's storm guard may still refuse a retry when the outcomes of
// 64 goroutines reach it in an order where more attempts fail in a row
// than it allows (retry.Adaptive's Streak: 3 until a retry has worked, 8
// after): ErrBudgetExhausted, the guard working, not a token. Measured: none
// without the race detector, at most 5 of 512 calls in 27 runs with it (2
// cores); 2% are allowed.
func TestManyGoroutinesOfSuccessesNeverWantAToken(t *testing.T) {
	const goroutines, calls = 64, 8
	s := newBrownout(t)
	type outcome struct {
		failed, wanted, guarded atomic.Int64
		mu                      sync.Mutex
		first                   error
	}
	run := func(table string, r aws.Retryer, o *outcome) {
		c := ddb(s, r)
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range calls {
					err := getTable(context.Background(), c, table)
					if err == nil {
						continue
					}
					o.failed.Add(1)
					switch {
					case quotaExceeded(err) || errors.Is(err, retry.ErrQuotaExhausted):
						o.wanted.Add(1)
					case errors.Is(err, retry.ErrBudgetExhausted):
						o.guarded.Add(1)
					}
					o.mu.Lock()
					if o.first == nil {
						o.first = err
					}
					o.mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	var ours, sdk outcome
	run("awsretry", awsretry.New(awsretry.Options{}), &ours)
	run("SDK standard", sdkretry.NewStandard(), &sdk)
	total := int64(goroutines * calls)
	t.Logf("of %d calls each: the default Retryer failed %d (%d for want of a token, %d refused by the storm guard); the SDK's standard retryer failed %d (%d for want of a token)",
		total, ours.failed.Load(), ours.wanted.Load(), ours.guarded.Load(), sdk.failed.Load(), sdk.wanted.Load())
	if ours.wanted.Load() != 0 || ours.failed.Load() != ours.guarded.Load() || ours.guarded.Load() > total/50 {
		t.Errorf("the default Retryer: %d of %d calls failed, %d for want of a token, %d refused by the storm guard (at most 2%% may be); the first with %v",
			ours.failed.Load(), total, ours.wanted.Load(), ours.guarded.Load(), ours.first)
	}
	if sdk.wanted.Load() == 0 {
		t.Errorf("the SDK's standard retryer failed no call for want of a token (%d failed, the first with %v): the test shows nothing, or the SDK changed its quota",
			sdk.failed.Load(), sdk.first)
	}
}

// tableOf returns the TableName of a DynamoDB request's JSON body.
func tableOf(r *http.Request) string {
	b, _ := io.ReadAll(r.Body)
	_, rest, _ := bytes.Cut(b, []byte(`"TableName":"`))
	name, _, _ := bytes.Cut(rest, []byte(`"`))
	return string(name)
}

func getTable(ctx context.Context, c *dynamodb.Client, table string) error {
	_, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table),
		Key:       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}},
	})
	return err
}

// An outage against 200 clients, each with its own Retryer as the SDK
// asks, each offering 25 calls paced over 2 s (one every 80 ms, whatever
// the calls take): the default sends little more than the load offered,
// requests sent / calls offered <= 1.1, where the SDK's standard and
// adaptive retryers, beside it at the same time, multiply it
// (aws/aws-sdk-go-v2#3413: their quota drains, then buys each call less).
//
// The default's cost is each client's first failing call, retried twice
// before three failures in a row stop its retries (retry.Adaptive's
// Streak): (n+2)/n for n calls a client, so the ratio means something only
// when the load is defined. Measured by calls made in a fixed time
// instead, as this test once was, it read 1.81 on a busy machine, whose
// clients made 2 or 3 calls each, and 1.11 on an idle one (18 calls each),
// with the same 2 retries a client. The SDK's retryers retry every call
// alike, each on its own: 20 clients of each run beside the 200, the same
// load each; under the race detector, 25 clients and 5 of each.
func TestOutageSendsLittleMoreThanOffered(t *testing.T) {
	if testing.Short() {
		t.Skip("an outage of 2 s")
	}
	const calls, every = 25, 80 * time.Millisecond
	clients, sdkClients := 200, 20
	if raceEnabled {
		// The same load a client, for fewer of them: the ratio is each
		// client's, and the race detector makes an SDK call too costly for
		// 200 of them to keep the pace on a small machine.
		clients, sdkClients = 25, 5
	}
	var mu sync.Mutex
	sent := map[string]int64{} // by table: by retryer
	s := newService(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		table := tableOf(r)
		mu.Lock()
		sent[table]++
		mu.Unlock()
		ddbError(w, 500, "InternalServerError")
	})
	fastSDK := func(o *sdkretry.StandardOptions) {
		o.Backoff = sdkretry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	}
	groups := []struct {
		table      string
		clients    int
		newRetryer func() aws.Retryer
	}{
		{"awsretry", clients, func() aws.Retryer { return awsretry.New(awsretry.Options{}) }},
		{"SDK standard", sdkClients, func() aws.Retryer { return sdkretry.NewStandard(fastSDK) }},
		{"SDK adaptive", sdkClients, func() aws.Retryer {
			return sdkretry.NewAdaptiveMode(func(o *sdkretry.AdaptiveModeOptions) { o.StandardOptions = append(o.StandardOptions, fastSDK) })
		}},
	}
	// Every client offers calls, one every pace from its start, whatever
	// the calls take; the starts are spread over a pace.
	start := time.Now()
	var wg sync.WaitGroup
	for _, g := range groups {
		for i := range g.clients {
			c := ddb(s, g.newRetryer())
			first := start.Add(time.Duration(i) * every / time.Duration(g.clients))
			wg.Go(func() {
				for n := range calls {
					time.Sleep(time.Until(first.Add(time.Duration(n) * every)))
					_ = getTable(context.Background(), c, g.table)
				}
			})
		}
	}
	wg.Wait()
	ratio := func(i int) float64 { return float64(sent[groups[i].table]) / float64(groups[i].clients*calls) }
	t.Logf("requests sent / calls offered (%d a client in %v): awsretry %d/%d = %.2f (%d clients), SDK standard %.2f, SDK adaptive %.2f (%d clients each)",
		calls, time.Since(start).Round(time.Millisecond), sent["awsretry"], clients*calls, ratio(0), clients, ratio(1), ratio(2), sdkClients)
	if r := ratio(0); r > 1.1 {
		t.Errorf("awsretry sent %.2fx the calls offered, want <= 1.1x", r)
	}
	if extra := sent["awsretry"] - int64(clients*calls); extra > int64(2*clients) {
		t.Errorf("awsretry retried %d times for %d clients, want at most 2 each", extra, clients)
	}
	if r := ratio(1); r <= 1.1 {
		t.Errorf("the SDK's standard retryer sent %.2fx: the test shows nothing", r)
	}
}

// After an outage long enough to drain the SDK's retry quota, the default
// recovers at once (aws/aws-sdk-go-v2#3550 reported the SDK's adaptive
// retryer never refilling its quota, fixed in v1.48.0: see
// TestSDKAdaptiveRefillsItsQuotaOnePerSuccess; its outcome here is logged
// beside):
// the first call after the outage succeeds, no first attempt being ever
// refused, and a transient failure is retried as soon as the service has
// shown itself healthy, by as many successes as the outage had failures,
// not a Window later. The strategy's clock is the test's and stands still:
// no time passes between the outage and the retry.
//
// Retries resume by the successes because of retry.Adaptive's client-side
// throttling, which refuses a retry with probability (attempts −
// 2·accepts)/(attempts + 1) over its Window: the outage's failed attempts
// weigh on it until successes balance them or they leave the Window (10
// s). Before that, each success makes a refusal less likely: measured
// with the clock standing still, a 60-call outage (62 failed attempts)
// saw a first-failing call retried after a median of 6 healthy calls, at
// most 20, in 30 runs; 2 and 6 after a 5-call outage.
func TestRecoversAfterTheOutage(t *testing.T) {
	var down atomic.Bool
	s := newService(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		table := tableOf(r)
		switch {
		case down.Load():
			ddbError(w, 503, "ServiceUnavailable")
		case table == "fail-first" && firstAttemptOf(r):
			ddbError(w, 500, "InternalServerError")
		default:
			ddbItem(w)
		}
	})
	clock := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	ours := retry.NewAdaptive(retry.AdaptiveOptions{Now: clock, StandardOptions: retry.StandardOptions{
		Backoff: retry.Constant(time.Millisecond), ThrottleBackoff: retry.Constant(time.Millisecond),
	}})
	fastSDK := func(o *sdkretry.StandardOptions) {
		o.Backoff = sdkretry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	}
	cases := []struct {
		name string
		r    aws.Retryer
		ours bool
	}{
		{"awsretry", awsretry.New(awsretry.Options{Strategy: ours}), true},
		{"SDK adaptive", sdkretry.NewAdaptiveMode(func(o *sdkretry.AdaptiveModeOptions) {
			o.StandardOptions = append(o.StandardOptions, fastSDK)
		}), false},
	}
	for _, tc := range cases {
		c := ddb(s, tc.r)
		down.Store(true)
		before := s.requests.Load()
		for range 60 { // 60 calls of 3 attempts: more retries than a bucket of 500 pays for
			_ = getTable(context.Background(), c, "t")
		}
		failed := s.requests.Load() - before
		down.Store(false)
		// As many successes as the outage had failed attempts, and one for
		// the failure to come: the first of them at once.
		for n := range failed + 1 {
			if err := getTable(context.Background(), c, "t"); err != nil {
				t.Fatalf("%s: call %d after the outage: %v", tc.name, n+1, err)
			}
		}
		before = s.requests.Load()
		err := getTable(context.Background(), c, "fail-first")
		sent := s.requests.Load() - before
		switch {
		case tc.ours && (err != nil || sent != 2):
			t.Errorf("%s: a transient failure after recovery (%d failed attempts, then %d successes): %v after %d requests, want it retried",
				tc.name, failed, failed+1, err, sent)
		case !tc.ours:
			t.Logf("%s: a transient failure after recovery: %v, %d requests", tc.name, err, sent)
		}
	}
}

// The SDK's adaptive retryer refills its quota as its standard retryer
// does, by one token for each call that succeeds at its first attempt:
// aws/aws-sdk-go-v2#3550 (it never refilled, so that retries stopped for
// the life of the process after an outage) is fixed in the version this
// module requires, v1.48.0, whose AdaptiveMode.GetAttemptToken
// (aws/retry/adaptive.go:149-157) chains the standard retryer's release
// (standard.go:265-285, NoRetryIncrement); v1.47.7 returned its rate
// limiter's release alone (adaptive.go:148), and this test fails there.
//
// What remains is the quota's design, as for the standard retryer: an
// outage drains it, the service recovers, and a transient failure is not
// retried, "retry quota exceeded", until as many calls have succeeded as
// the retry's cost exceeds what the outage left (4 here: 14 tokens
// requested, 10 left); the test holds that count exactly. The default
// Retryer has no quota to drain; when its retries resume is
// TestRecoversAfterTheOutage's.
func TestSDKAdaptiveRefillsItsQuotaOnePerSuccess(t *testing.T) {
	var down atomic.Bool
	s := newService(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		switch {
		case down.Load():
			ddbError(w, 503, "ServiceUnavailable")
		case tableOf(r) == "fail-first" && firstAttemptOf(r):
			ddbError(w, 500, "InternalServerError")
		default:
			ddbItem(w)
		}
	})
	c := ddb(s, sdkretry.NewAdaptiveMode(func(o *sdkretry.AdaptiveModeOptions) {
		o.StandardOptions = append(o.StandardOptions, func(o *sdkretry.StandardOptions) {
			o.Backoff = sdkretry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		})
	}))
	down.Store(true)
	drained := false
	for range 60 { // 60 calls of 3 attempts: more retries than 500 tokens pay for
		drained = quotaExceeded(getTable(context.Background(), c, "t")) || drained
	}
	down.Store(false)
	if !drained {
		t.Fatal("60 calls of an outage left the SDK's adaptive retryer's quota whole: the test shows nothing")
	}
	// transient makes a call whose first attempt fails, and returns the
	// requests it sent and the quota error that refused its retry, if any.
	transient := func() (int64, *ratelimit.QuotaExceededError) {
		before := s.requests.Load()
		err := getTable(context.Background(), c, "fail-first")
		sent := s.requests.Load() - before
		var qe ratelimit.QuotaExceededError
		switch {
		case errors.As(err, &qe):
			return sent, &qe
		case err != nil:
			t.Fatalf("a transient failure after the outage: %v", err)
		}
		return sent, nil
	}
	sent, qe := transient()
	if qe == nil || sent != 1 {
		t.Fatalf("a transient failure right after the outage: %d requests, quota error %v; want its retry refused for want of a token", sent, qe)
	}
	need := int(qe.Requested - qe.Available)
	t.Logf("after the outage: %v; %d successes should pay for a retry", qe, need)
	succeed := func(n int) {
		for i := range n {
			if err := getTable(context.Background(), c, "t"); err != nil {
				t.Fatalf("call %d after the outage: %v", i+1, err)
			}
		}
	}
	succeed(need - 1)
	if sent, qe := transient(); qe == nil || sent != 1 {
		t.Fatalf("after %d successes, one short: %d requests, quota error %v; want the retry still refused", need-1, sent, qe)
	}
	succeed(1)
	if sent, qe := transient(); qe != nil || sent != 2 {
		t.Fatalf("after %d successes: %d requests, quota error %v; want the transient failure retried: the SDK's adaptive retryer does not refill its quota (aws/aws-sdk-go-v2#3550)",
			need, sent, qe)
	}
}

var _ = retry.ErrQuotaExhausted
