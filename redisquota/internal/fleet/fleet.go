package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/redisquota"
)

// Environment of a worker process.
const (
	envWorker   = "RETRYKIT_FLEET_WORKER"
	envURL      = "RETRYKIT_FLEET_URL"
	envRedis    = "RETRYKIT_FLEET_REDIS"
	envKey      = "RETRYKIT_FLEET_KEY"
	envRequests = "RETRYKIT_FLEET_REQUESTS"
	envCapacity = "RETRYKIT_FLEET_CAPACITY"
)

// IsWorker reports whether this process was started as a worker by Run.
func IsWorker() bool { return os.Getenv(envWorker) == "1" }

// Config describes one run of a fleet.
type Config struct {
	Processes int    // processes running at once
	Waves     int    // times the fleet is started, one after another; 0 = 1
	Requests  int    // requests each process sends
	Capacity  int    // the quota's capacity, per process or for the fleet
	Redis     string // address of the Redis holding the shared quota; "" = a quota per process
	Key       string // the shared quota's key
	// Command returns the command that starts one worker: a program whose
	// main calls Worker when IsWorker reports true.
	Command func() *exec.Cmd
}

// Result is what the failing server saw.
type Result struct {
	Requests   int   // requests the processes sent
	Attempts   int64 // attempts the server received
	RoundTrips int64 // calls the processes made to Redis, Close's last ones included
}

// Amplification is attempts per request.
func (r Result) Amplification() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Attempts) / float64(r.Requests)
}

// Run starts a loopback HTTP server that fails every request with 503, runs
// the fleet against it and returns what the server saw.
func Run(ctx context.Context, c Config) (Result, error) {
	var attempts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	env := append(os.Environ(), envWorker+"=1", envURL+"="+srv.URL, envRedis+"="+c.Redis,
		envKey+"="+c.Key, envRequests+"="+strconv.Itoa(c.Requests), envCapacity+"="+strconv.Itoa(c.Capacity))
	var trips atomic.Int64
	for range max(c.Waves, 1) {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for range c.Processes {
			cmd := c.Command()
			cmd.Env = env
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				return Result{}, fmt.Errorf("start worker: %w", err)
			}
			wg.Go(func() {
				if err := cmd.Wait(); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("worker: %w\n%s", err, out.String()))
					mu.Unlock()
					return
				}
				var n int64
				if _, err := fmt.Sscanf(out.String(), "round trips %d", &n); err == nil {
					trips.Add(n)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return Result{}, err
		}
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
	}
	return Result{Requests: max(c.Waves, 1) * c.Processes * c.Requests, Attempts: attempts.Load(), RoundTrips: trips.Load()}, nil
}

// statusError is a failed response: a server fault, so retried.
type statusError int

func (e statusError) Error() string { return "HTTP " + strconv.Itoa(int(e)) }

func (e statusError) RetryInfo() retry.Info { return retry.Info{Fault: retry.FaultServer} }

// Worker is the body of a worker process: it sends its requests, each with
// up to 3 attempts under a Standard strategy (retry cost 14), taking retry
// tokens from its own quota or from the fleet's.
func Worker(ctx context.Context) error {
	requests, err := strconv.Atoi(os.Getenv(envRequests))
	if err != nil {
		return fmt.Errorf("%s: %w", envRequests, err)
	}
	capacity, err := strconv.Atoi(os.Getenv(envCapacity))
	if err != nil {
		return fmt.Errorf("%s: %w", envCapacity, err)
	}
	var quota retry.Quota = retry.NewTokenBucket(capacity)
	if addr := os.Getenv(envRedis); addr != "" {
		client := redis.NewClient(&redis.Options{Addr: addr})
		defer client.Close()
		// A Timeout of 1 s, not 100 ms: a fleet of processes starting at
		// once on a small machine can be slower than that to dial Redis, and
		// a process that fell back would measure its local quota, not the
		// fleet's.
		q := redisquota.New(client, os.Getenv(envKey), redisquota.Options{Capacity: capacity, Timeout: time.Second})
		defer func() {
			_ = q.Close()
			fmt.Printf("round trips %d\n", q.RoundTrips())
		}()
		quota = q
	}
	s := retry.NewStandard(retry.StandardOptions{
		MaxAttempts: 3,
		Backoff:     retry.Exponential{Base: time.Millisecond, Max: 10 * time.Millisecond, Jitter: retry.FullJitter},
		Bucket:      quota,
	})
	client := &http.Client{Timeout: 5 * time.Second}
	url := os.Getenv(envURL)
	for range requests {
		_ = retry.Do(ctx, s, func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return retry.Permanent(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return statusError(resp.StatusCode)
			}
			return nil
		})
	}
	return ctx.Err()
}
