package redisquota_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/redisquota"
	"github.com/retrykit/retry/redisquota/internal/fleet"
)

// sharedRedis is the address of the redis-server TestMain starts for the
// tests that do not kill theirs. Each test uses keys of its own. "" = no
// redis-server: the tests that need one skip, saying why (noRedis).
var sharedRedis string

// noRedis is why the tests that need a redis-server skip.
var noRedis string

// upTimeout is the Timeout of the quotas of tests that need Redis to answer
// every call: Timeout is enforced (see TestHungRedis), and the default
// 100 ms can pass on a loaded 2-core machine under -race, where a fallback
// would fail a test about something else.
const upTimeout = 2 * time.Second

// requireServers names the environment variable that turns a missing
// redis-server from a skip into a failure, for CI: there the tests must
// run, and a skip would pass unnoticed.
const requireServers = "RETRYKIT_REQUIRE_SERVERS"

func TestMain(m *testing.M) {
	if fleet.IsWorker() {
		if err := worker(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "redisquota-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	r, err := fleet.StartRedis(context.Background(), dir)
	switch {
	case errors.Is(err, fleet.ErrNoRedisServer) && os.Getenv(requireServers) == "":
		// A machine with Go alone runs what it can: the tests of the
		// quota's timing (schedule_test.go) need no server.
		noRedis = "redis-server not found on PATH: install it (apt-get install redis-server, brew install redis) to run the redisquota tests against Redis; " +
			requireServers + "=1 makes its absence a failure"
		fmt.Fprintln(os.Stderr, "redisquota: skipping the tests that need Redis:", noRedis)
		// Examples cannot skip, and Example needs the server: leave the
		// examples out unless -test.run chose what to run.
		flag.Parse()
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			_ = f.Value.Set("^Test")
		}
	case err != nil:
		fmt.Fprintf(os.Stderr, "redisquota tests need redis-server (%s=%q): %v\n", requireServers, os.Getenv(requireServers), err)
		os.RemoveAll(dir)
		os.Exit(1)
	default:
		sharedRedis = r.Addr
	}
	// go-redis logs every failed dial; the tests kill Redis on purpose.
	redis.SetLogger(quietLogger{})
	code := m.Run()
	if r != nil {
		_ = r.Kill()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// needRedis skips t when there is no redis-server to test against.
func needRedis(t testing.TB) {
	t.Helper()
	if sharedRedis == "" {
		t.Skip(noRedis)
	}
}

// worker is the body of a process this test binary starts as a worker.
func worker() error {
	if os.Getenv("REDISQUOTA_TEST_HOLD") != "" {
		return holdLease()
	}
	return fleet.Worker(context.Background())
}

// client returns a client of the shared Redis, closed with the test.
func client(t testing.TB) *redis.Client {
	t.Helper()
	needRedis(t)
	c := redis.NewClient(&redis.Options{Addr: sharedRedis})
	t.Cleanup(func() { c.Close() })
	return c
}

// startRedis starts a redis-server of the test's own.
func startRedis(t testing.TB, extra ...string) *fleet.Redis {
	t.Helper()
	needRedis(t)
	r, err := fleet.StartRedis(t.Context(), t.TempDir(), extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Kill() })
	return r
}

// logs records the messages of slog records.
type logs struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	l.msgs = append(l.msgs, msg)
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

// count returns how many records contain s.
func (l *logs) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(slices.DeleteFunc(slices.Clone(l.msgs), func(m string) bool { return !strings.Contains(m, s) }))
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.msgs, "\n")
}

// pool reads the fleet's pool of key: tokens free and tokens leased.
func pool(t testing.TB, c redis.UniversalClient, key string) (tokens, leased int) {
	t.Helper()
	v, err := c.HMGet(t.Context(), redisquota.Keys(key)[0], "tokens", "leased").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n [2]int
	for i, s := range v {
		if s == nil {
			t.Fatalf("pool of %q: field %d missing", key, i)
		}
		if _, err := fmt.Sscan(s.(string), &n[i]); err != nil {
			t.Fatal(err)
		}
	}
	return n[0], n[1]
}

// quietLogger drops go-redis's own log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// fresh deletes the keys of a quota on key in the shared Redis, left by an
// earlier run (go test -count), and returns key.
func fresh(t testing.TB, key string) string {
	t.Helper()
	needRedis(t)
	c := redis.NewClient(&redis.Options{Addr: sharedRedis})
	defer c.Close()
	if err := c.Del(t.Context(), redisquota.Keys(key)...).Err(); err != nil {
		t.Fatal(err)
	}
	return key
}
