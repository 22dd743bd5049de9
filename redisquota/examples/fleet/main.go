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
	"os"
	"os/exec"
	"os/signal"
	"time"

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
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	processes := flag.Int("processes", 8, "processes running at once")
	waves := flag.Int("waves", 5, "times the fleet is started, one after another")
	requests := flag.Int("requests", 10, "requests each process sends")
	capacity := flag.Int("capacity", 500, "quota capacity: per process, or for the whole fleet")
	addr := flag.String("redis", "", "address of a Redis to use (default: start redis-server on loopback)")
	flag.Parse()

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
	fmt.Printf("%d waves of %d processes, %d requests each, every request failing, up to 3 attempts, quota capacity %d\n",
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
		fmt.Printf("%-34s %5d requests  %5d attempts  amplification %.2fx", name, res.Requests, res.Attempts, res.Amplification())
		if shared {
			fmt.Printf("  (%d round trips to Redis)", res.RoundTrips)
		}
		fmt.Println()
	}
	return nil
}
