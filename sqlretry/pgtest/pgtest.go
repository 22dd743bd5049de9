//go:build linux

// Package pgtest starts a throwaway PostgreSQL cluster for tests, as
// net/http/httptest starts a server: initdb into a temporary directory and a
// postgres server on a unix socket in it (and on loopback TCP, given the
// setting Loopback), run as a user other than root
// (initdb refuses root), stopped and removed by Stop. sqlretry's tests and
// the repository's benchmarks use it; so may the tests of code that calls
// sqlretry. It never runs the test binary again: it only runs PostgreSQL's
// own programs. It needs Linux (the server is tied to its starter's thread,
// so that no server outlives a test binary that died).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// DSNEnv names the environment variable that gives the tests a server of
// one's own instead of a throwaway cluster: a connection string for a
// database where the tests may create and drop tables.
const DSNEnv = "SQLRETRY_TEST_DSN"

// RequireEnv names the environment variable that turns a missing server from
// a skip into a failure, for CI: there the tests must run, and a skip would
// pass unnoticed.
const RequireEnv = "RETRYKIT_REQUIRE_SERVERS"

// ErrNoPostgres is the error of Start on a machine without PostgreSQL.
var ErrNoPostgres = errors.New("PostgreSQL not found: no initdb and postgres on PATH nor under /usr/lib/postgresql/*/bin; " +
	"install it (apt-get install postgresql, brew install postgresql) or set " + DSNEnv + " to a database the tests may use")

// Loopback, given to Start as a setting, makes the server listen on
// 127.0.0.1 too, at a port free when it starts, for clients that must reach
// it over TCP (what a benchmark of round trips measures): LoopbackDSN
// connects there.
const Loopback = "listen_addresses=127.0.0.1"

// Cluster is a running PostgreSQL server.
type Cluster struct {
	DSN string // a pgx connection string for the database "postgres"
	// LoopbackDSN connects over TCP to 127.0.0.1, for a cluster started
	// with the setting Loopback; it is DSN for the server of DSNEnv, and
	// "" otherwise.
	LoopbackDSN string

	dir  string // the temporary directory, "" if the server is not ours
	bin  string
	cmd  *exec.Cmd
	cred *syscall.Credential
	exit chan error
}

// Start returns the server of DSNEnv if set, else starts a cluster of its
// own, with settings ("name=value") added to the server's. The server is a
// child of the calling thread, killed when that thread ends (its
// parent-death signal), so that no server outlives a test binary that died
// without Stop (a panicking test): call Start from a goroutine locked to its
// thread for good (TestMain, after runtime.LockOSThread).
func Start(ctx context.Context, settings ...string) (*Cluster, error) {
	if dsn := os.Getenv(DSNEnv); dsn != "" {
		return &Cluster{DSN: dsn, LoopbackDSN: dsn}, nil
	}
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sqlretry-pg")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, bin: bin, exit: make(chan error, 1)}
	if err := c.start(ctx, settings); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// findBin finds the directory of initdb and postgres: on PATH, else the
// newest version under /usr/lib/postgresql (Debian and Ubuntu install
// postgres there, off PATH).
func findBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

// runAs returns the credential to run PostgreSQL's programs with: none when
// this process is not root, else the user postgres, or nobody.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
		}
	}
	return nil, errors.New("running as root, and neither the user postgres nor nobody exists to run initdb as")
}

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

func (c *Cluster) start(ctx context.Context, settings []string) error {
	var err error
	if c.cred, err = runAs(); err != nil {
		return err
	}
	if c.cred != nil {
		if err := os.Chown(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return err
		}
	}
	data := filepath.Join(c.dir, "data")
	initdb := c.command(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port := "5432" // the unix socket's name only, in a directory of its own
	if slices.Contains(settings, Loopback) {
		p, err := freePort()
		if err != nil {
			return err
		}
		port = strconv.Itoa(p)
	}
	args := []string{"-D", data, "-k", c.dir, "-c", "listen_addresses=", "-p", port,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	log, err := os.Create(filepath.Join(c.dir, "postgres.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	c.cmd = c.command(context.Background(), "postgres", args...)
	c.cmd.Stdout, c.cmd.Stderr = log, log
	if c.cmd.SysProcAttr == nil {
		c.cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL // no server outlives a test binary that died
	c.cmd.SysProcAttr.Setpgid = true              // not killed with the terminal's ^C before Stop runs
	if err := c.cmd.Start(); err != nil {
		return err
	}
	go func() { c.exit <- c.cmd.Wait() }()
	c.DSN = "host=" + c.dir + " port=" + port + " user=postgres dbname=postgres sslmode=disable"
	if slices.Contains(settings, Loopback) {
		c.LoopbackDSN = "host=127.0.0.1 port=" + port + " user=postgres dbname=postgres sslmode=disable"
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, c.DSN)
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case err := <-c.exit:
			c.cmd = nil
			out, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
			return fmt.Errorf("postgres exited: %v\n%s", err, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections in 30s: %v", err)
		}
	}
}

// freePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop stops the server as pg_ctl stop -m immediate does (SIGQUIT) and
// removes its directory. It does nothing to a server of DSNEnv.
func (c *Cluster) Stop() {
	if c == nil || c.dir == "" {
		return
	}
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-c.exit:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exit
		}
	}
	_ = os.RemoveAll(c.dir)
}

// Missing reports whether err says PostgreSQL is not installed.
func Missing(err error) bool { return errors.Is(err, ErrNoPostgres) }

// Required reports whether RequireEnv asks for the server's absence to fail.
func Required() bool {
	return strings.TrimSpace(os.Getenv(RequireEnv)) != "" && os.Getenv(RequireEnv) != "0"
}
