package redisquota

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
)

// FleetOptions set how a FleetAdaptive or a FleetBreaker syncs with Redis:
// NewFleetAdaptiveWith and NewFleetBreakerWith take them. The zero value
// is NewFleetAdaptive's and NewFleetBreaker's: each field's zero takes its
// default. Processes sharing a name should use the same FleetOptions.
//
// A large fleet syncs less often. Each process makes one script call per
// FlushInterval, whatever its request rate, so 10,000 processes make
// 100,000 calls a second at the default 100 ms, and 10,000 at one second:
// the fleet then learns of an outage, and a circuit opened by the fleet
// reaches every process, within about two FlushIntervals instead of 200 ms.
type FleetOptions struct {
	// FlushInterval is how often a process sends what it counted and
	// takes the fleet's views back; 0 = 100 ms. A view stays fresh for
	// two FlushIntervals plus Timeout: past that, the process decides on
	// its own evidence until the next answer.
	FlushInterval time.Duration
	// Timeout bounds each call to Redis, whatever the client's options;
	// 0 = 100 ms. A FleetBreaker's probe claim, the one call a request
	// waits on, waits no longer.
	Timeout time.Duration
	// ReconnectMax caps the jittered exponential backoff, from
	// FlushInterval, between tries to reach Redis again; 0 = 5 s.
	ReconnectMax time.Duration
	// KeyTTL is the time to live of a FleetBreaker's circuit keys,
	// renewed by every call, so that the keys of circuits no process uses
	// go away; 0 = 24 h, negative = never. A FleetAdaptive's evidence
	// keys live two windows, whatever KeyTTL says.
	KeyTTL time.Duration
	// Logger receives one record when the process stops reaching Redis
	// and one when it reaches it again; nil = slog.Default().
	Logger *slog.Logger
	// Rand returns numbers in [0, 1) for the reconnect jitter; nil =
	// math/rand/v2. Tests pin it.
	Rand func() float64
}

// options returns the package's Options with fo's timing and logging.
func (fo FleetOptions) options() Options {
	return Options{
		FlushInterval: fo.FlushInterval,
		Timeout:       fo.Timeout,
		ReconnectMax:  fo.ReconnectMax,
		KeyTTL:        fo.KeyTTL,
		Logger:        fo.Logger,
		Rand:          fo.Rand,
	}
}

// NewFleetAdaptiveWith is NewFleetAdaptive with the sync that fo sets: a
// large fleet's longer FlushInterval, a Timeout for a distant Redis.
func NewFleetAdaptiveWith(rdb redis.UniversalClient, name string, opts retry.AdaptiveOptions, fo FleetOptions) (*FleetAdaptive, error) {
	return newFleetAdaptive(rdb, name, opts, fo.options())
}

// NewFleetBreakerWith is NewFleetBreaker with the sync that fo sets: a
// large fleet's longer FlushInterval, a Timeout for a distant Redis.
func NewFleetBreakerWith(rdb redis.UniversalClient, name string, opts retry.BreakerOptions, fo FleetOptions) (*FleetBreaker, error) {
	return newFleetBreaker(rdb, name, opts, fo.options())
}
