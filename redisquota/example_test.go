package redisquota_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/redisquota"
)

// Every process of a fleet that calls a service builds its strategy on the
// same quota key: together they hold one retry quota of 500 tokens.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: sharedRedis}) // e.g. "localhost:6379"
	defer client.Close()
	quota := redisquota.New(client, "payments-api", redisquota.Options{Capacity: 500})
	defer quota.Close()
	strategy := retry.NewStandard(retry.StandardOptions{Bucket: quota})

	attempts := 0
	err := retry.Do(context.Background(), strategy, func(ctx context.Context) error {
		attempts++
		if attempts == 1 {
			return retry.Transient(errors.New("503 Service Unavailable"))
		}
		return nil
	})
	fmt.Println("attempts:", attempts, "error:", err, "shared:", quota.Shared())
	// Output: attempts: 2 error: <nil> shared: true
}

// Every process of a fleet that calls a service builds its strategy on the
// same name: each decides its retries on the evidence of the whole fleet,
// synchronised in the background.
func ExampleNewFleetAdaptive() {
	client := redis.NewClient(&redis.Options{Addr: sharedRedis}) // e.g. "localhost:6379"
	defer client.Close()
	fleet, err := redisquota.NewFleetAdaptive(client, "payments-api", retry.AdaptiveOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer fleet.Close()
	strategy := fleet.Strategy() // for retry.Do, httpretry.Transport, grpcretry.WithStrategy, ...

	attempts := 0
	err = retry.Do(context.Background(), strategy, func(ctx context.Context) error {
		attempts++
		if attempts == 1 {
			return retry.Transient(errors.New("503 Service Unavailable"))
		}
		return nil
	})
	fmt.Println("attempts:", attempts, "error:", err)
	// Output: attempts: 2 error: <nil>
}

// A large fleet syncs less often: 10,000 processes syncing every second
// make 10,000 calls a second to Redis, where the default 100 ms would make
// 100,000.
func ExampleNewFleetBreakerWith() {
	client := redis.NewClient(&redis.Options{Addr: sharedRedis}) // e.g. "localhost:6379"
	defer client.Close()
	fleet, err := redisquota.NewFleetBreakerWith(client, "payments-api", retry.BreakerOptions{},
		redisquota.FleetOptions{FlushInterval: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer fleet.Close()

	err = retry.Do(context.Background(), retry.NewStandard(retry.StandardOptions{}), func(ctx context.Context) error {
		return nil
	}, retry.WithBreaker(fleet.Breaker()))
	fmt.Println("error:", err)
	// Output: error: <nil>
}
