package awsretry

import (
	"context"
	"sync"

	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
)

// The SDK's Attempt middleware tells a retryer which attempt it is about to
// make only through a value it keeps to itself: GetAttemptToken gets a
// context whose attempt number no public function reads. The SDK's own
// Standard retryer reads it, and gives the initial token only to a first
// attempt, whose release adds NoRetryIncrement tokens to its rate limiter
// on success. So a Standard whose rate limiter notes that addition tells
// first attempts from retries; one from a pool per question, since the
// note is the asker's alone.

// firstProbe is a Standard retryer whose rate limiter notes whether tokens
// were added.
type firstProbe struct {
	std   *sdkretry.Standard
	added bool
}

func (p *firstProbe) GetToken(context.Context, uint) (func() error, error) { return noRefund, nil }
func (p *firstProbe) AddTokens(uint) error                                 { p.added = true; return nil }

func noRefund() error { return nil }

var probes = sync.Pool{New: func() any {
	p := &firstProbe{}
	p.std = sdkretry.NewStandard(func(o *sdkretry.StandardOptions) {
		o.RateLimiter = p
		o.NoRetryIncrement = 1
	})
	return p
}}

// firstAttempt reports whether ctx, the context the SDK's Attempt middleware
// hands GetAttemptToken, is that of a call's first attempt. A context that
// did not come from the middleware is taken for a first attempt.
func firstAttempt(ctx context.Context) bool {
	p := probes.Get().(*firstProbe)
	p.added = false
	release, err := p.std.GetAttemptToken(ctx)
	if err == nil && release != nil {
		_ = release(nil) // a first attempt's token adds to the limiter
	}
	first := p.added || err != nil
	probes.Put(p)
	return first
}
