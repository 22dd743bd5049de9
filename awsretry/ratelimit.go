package awsretry

import (
	"context"
	"fmt"
	"math"

	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/retrykit/retry"
)

// RateLimiter returns q as the SDK's sdkretry.RateLimiter, the retry quota
// of the SDK's own standard and adaptive retryers, for a user who keeps
// them but wants their quota shared (redisquota's, a fleet's) or bounded
// by retrykit's bucket:
//
//	sdkretry.NewStandard(func(o *sdkretry.StandardOptions) {
//		o.RateLimiter = awsretry.RateLimiter(quota)
//	})
//
// GetToken takes the retry's cost from q, or fails with a
// *retry.QuotaError (errors.Is(err, retry.ErrQuotaExhausted)) and takes
// nothing; its release puts the cost back, as the SDK calls it when the
// retry succeeded. AddTokens puts tokens back, never beyond q's capacity.
// A nil q is a retry.TokenBucket of 500 tokens, the SDK's own size.
func RateLimiter(q retry.Quota) sdkretry.RateLimiter {
	if q == nil {
		q = retry.NewTokenBucket(int(sdkretry.DefaultRetryRateTokens))
	}
	return quotaLimiter{q}
}

type quotaLimiter struct{ q retry.Quota }

// GetToken takes cost tokens from the quota.
func (l quotaLimiter) GetToken(ctx context.Context, cost uint) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("awsretry: no retry token taken: %w", err)
	}
	n := tokens(cost)
	if !l.q.Take(n) {
		return nil, &retry.QuotaError{Cost: n, Available: l.q.Available()}
	}
	refunded := false
	return func() error {
		if !refunded { // the SDK calls it once; a second call must not mint tokens
			refunded = true
			l.q.Refund(n)
		}
		return nil
	}, nil
}

// AddTokens puts n tokens back into the quota.
func (l quotaLimiter) AddTokens(n uint) error {
	l.q.Refund(tokens(n))
	return nil
}

// tokens converts the SDK's count to the quota's, saturating.
func tokens(n uint) int {
	if uint64(n) > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(n)
}
