// Package fleet runs a fleet of real processes that retry against a failing
// HTTP server, with per-process quotas or one quota shared through Redis, and
// starts redis-server on loopback. The tests and examples/fleet use it.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a redis-server process on loopback.
type Redis struct {
	Addr string
	dir  string
	args []string
	cmd  *exec.Cmd
}

// ErrNoRedisServer: redis-server is not on PATH.
var ErrNoRedisServer = errors.New("redis-server is not on PATH; install it (apt-get install redis-server, brew install redis) or pass the address of a Redis")

// StartRedis starts redis-server on a free loopback port, keeping its files
// in dir, with the extra arguments given (for example "--appendonly", "yes").
func StartRedis(ctx context.Context, dir string, extra ...string) (*Redis, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoRedisServer, err)
	}
	return start(ctx, dir, []string{path}, extra)
}

// StartSentinel starts a Redis Sentinel on a free loopback port that
// watches the master at masterAddr under the name master.
func StartSentinel(ctx context.Context, dir, master, masterAddr string) (*Redis, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoRedisServer, err)
	}
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 1000\n", master, host, port, master)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return nil, err
	}
	return start(ctx, dir, []string{path, conf, "--sentinel"}, nil)
}

func start(ctx context.Context, dir string, cmd, extra []string) (*Redis, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	r.args = append(append(cmd, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--protected-mode", "no", "--loglevel", "warning",
		"--logfile", filepath.Join(dir, "redis.log")), extra...)
	if len(cmd) == 1 {
		r.args = append(r.args, "--save", "")
	}
	return r, r.Start(ctx)
}

// Start starts the server again on the same port after Kill.
func (r *Redis) Start(ctx context.Context) error {
	cmd := exec.Command(r.args[0], r.args[1:]...)
	cmd.Dir = r.dir
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	r.cmd = cmd
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			_ = r.Kill()
			log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			return fmt.Errorf("redis-server on %s did not answer: %w\n%s", r.Addr, err, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill kills the server with SIGKILL and waits for it to exit.
func (r *Redis) Kill() error {
	if r.cmd == nil {
		return nil
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
