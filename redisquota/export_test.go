package redisquota

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
)

// RunScript runs the quota's script on key with the arguments a process
// sends (id, capacity, balance, grants received, refunds acknowledged,
// refunds recorded, wanted balance, least useful balance, lease TTL in ms,
// key TTL in ms), for tests that play a process call by call.
func RunScript(ctx context.Context, c redis.UniversalClient, key string, args ...any) ([]int64, error) {
	return syncScript.Run(ctx, c, Keys(key), args...).Int64Slice()
}

// NewFleetBreakerWith is NewFleetBreaker with the timing and logging of o
// (FlushInterval, Timeout, ReconnectMax, KeyTTL, Logger, Rand), for tests
// that need a Timeout a loaded machine keeps, or a Redis that comes back
// soon.
func NewFleetBreakerWith(rdb redis.UniversalClient, name string, opts retry.BreakerOptions, o Options) (*FleetBreaker, error) {
	return newFleetBreaker(rdb, name, opts, o)
}
