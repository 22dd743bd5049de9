// Command fleet shows what a fleet-wide retry quota changes. It starts
// processes that send requests to a local HTTP server in a sustained outage
// (every request fails with 503), each retrying up to 3 attempts under the
// Standard strategy, first with a quota per process, then with one quota
// shared through Redis, and prints the amplification (attempts the server
// received per request sent) of each.
//
// The processes come and go in waves, as they do in a fleet that restarts,
// scales out, or runs short jobs: a quota in memory starts full in every new
// process, while the fleet's quota in Redis remembers that the server is
// down.
//
//	go run ./redisquota/examples/fleet
//
// It starts its own redis-server on loopback if one is on PATH; otherwise
// pass -redis host:port.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/redisquota/internal/fleet"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if fleet.IsWorker() {
		if err := fleet.Worker(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("fleet", flag.ContinueOnError)
	processes := flags.Int("processes", 8, "processes running at once")
	waves := flags.Int("waves", 5, "times the fleet is started, one after another")
	requests := flags.Int("requests", 10, "requests each process sends")
	capacity := flags.Int("capacity", 500, "quota capacity: per process, or for the whole fleet")
	addr := flags.String("redis", "", "address of a Redis to use (default: start redis-server on loopback)")
	if err := flags.Parse(args); err != nil {
		return err
	}

	if *addr == "" {
		dir, err := os.MkdirTemp("", "fleet-redis")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		r, err := fleet.StartRedis(ctx, dir)
		if errors.Is(err, fleet.ErrNoRedisServer) {
			return fmt.Errorf("%w, e.g. go run ./redisquota/examples/fleet -redis localhost:6379", err)
		}
		if err != nil {
			return err
		}
		defer r.Kill()
		*addr = r.Addr
	} else if err := ping(ctx, *addr); err != nil {
		// Without this check the workers would fall back to their local
		// quotas, each on its own, and the "fleet quota" line would report
		// the per-process result as the fleet's.
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cfg := fleet.Config{
		Processes: *processes, Waves: *waves, Requests: *requests, Capacity: *capacity,
		Key:     fmt.Sprintf("fleet-example-%d", time.Now().UnixNano()),
		Command: func() *exec.Cmd { return exec.Command(self) },
	}
	fmt.Fprintf(stdout, "%d waves of %d processes, %d requests each, every request failing, up to 3 attempts, quota capacity %d\n",
		*waves, *processes, *requests, *capacity)
	for _, shared := range []bool{false, true} {
		name := "a quota per process"
		cfg.Redis = ""
		if shared {
			name, cfg.Redis = "one quota for the fleet (Redis)", *addr
		}
		res, err := fleet.Run(ctx, cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%-34s %5d requests  %5d attempts  amplification %.2fx", name, res.Requests, res.Attempts, res.Amplification())
		if shared {
			fmt.Fprintf(stdout, "  (%d round trips to Redis)", res.RoundTrips)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// ping checks that a Redis answers at addr, within 5 s.
func ping(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Our own client, so that it may honour the deadline; one try, no
	// retries, so that the error comes at once.
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis at %s (-redis): %w", addr, err)
	}
	return nil
}
