package redisquota

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/internal/sharedevidence"
)

// RunScript runs the quota's script on key with the arguments a process
// sends (id, capacity, balance, grants received, refunds acknowledged,
// refunds recorded, wanted balance, least useful balance, lease TTL in ms,
// key TTL in ms), for tests that play a process call by call.
func RunScript(ctx context.Context, c redis.UniversalClient, key string, args ...any) ([]int64, error) {
	return syncScript.Run(ctx, c, Keys(key), args...).Int64Slice()
}

// RunEvidenceScript runs the evidence script of the fleet name on reports
// at now, on the clock of the caller rather than Redis's, with the fleet's
// window, and returns the fleet's views: the script as a test plays it
// against sharedevidence.Memory.
func RunEvidenceScript(ctx context.Context, c redis.UniversalClient, name string, now, window time.Duration, reports []sharedevidence.Report) ([]sharedevidence.View, error) {
	keys := make([]string, len(reports))
	for i, r := range reports {
		keys[i] = EvidenceKey(name, r.Scope)
	}
	v, err := evidenceSyncScript.Run(ctx, c, keys, evidenceArgs(nil, now, window, reports)...).Int64Slice()
	if err != nil {
		return nil, err
	}
	return evidenceViews(nil, v, len(reports))
}

// Applied returns how many of f's syncs had their views applied.
func Applied(f *FleetAdaptive) uint64 { return f.applied.Load() }
