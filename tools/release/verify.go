package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A trial is a program a user of one released module would write: verify
// builds and runs each in a module of its own that requires only that
// module, since a go get of every module at once lets one module's
// requirements hide another's stale one.
type trial struct {
	Dir     string // the released module's directory
	Program string // main.go
	Want    string // a line the program prints when it worked
}

var trials = []trial{
	{"awsretry", `package main

import (
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	"github.com/retrykit/retry/awsretry"
)

func main() {
	var r aws.RetryerV2 = awsretry.New(awsretry.Options{})
	info := awsretry.Classify(&smithy.GenericAPIError{Code: "ThrottlingException"})
	if !info.Throttle || !r.IsErrorRetryable(&smithy.GenericAPIError{Code: "ThrottlingException"}) {
		log.Fatalf("ThrottlingException: %+v, want a retryable throttle", info)
	}
	fmt.Println("ok: awsretry, a Retryer for the AWS SDK; ThrottlingException is a throttle:", info.Throttle)
}
`, "ok: awsretry"},
	{".", `package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
	"github.com/retrykit/retry/httpretry"
)

func main() {
	attempts := 0
	err := retry.Do(context.Background(), retry.NewStandard(retry.StandardOptions{}), func(context.Context) error {
		attempts++
		if attempts == 1 {
			return retry.Transient(errors.New("first attempt fails"))
		}
		return nil
	})
	if err != nil || attempts != 2 {
		log.Fatalf("retry.Do: %v after %d attempts, want success after 2", err, attempts)
	}

	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	client := &http.Client{Transport: &httpretry.Transport{}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || hits.Load() != 2 {
		log.Fatalf("httpretry: status %d after %d requests, want 200 after 2", resp.StatusCode, hits.Load())
	}

	c := &forrst.Client{URL: srv.URL}
	fmt.Println("ok: retry, httpretry and", forrst.ProtocolName, "client for", c.URL != "")
}
`, "ok: retry, httpretry and forrst"},
	{"grpcretry", `package main

import (
	"fmt"
	"log"

	"github.com/retrykit/retry/grpcretry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	cc, err := grpc.NewClient("passthrough:///127.0.0.1:1",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(grpcretry.StreamClientInterceptor()))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	fmt.Println("ok: grpcretry interceptors on a client of", cc.Target())
}
`, "ok: grpcretry"},
	{"otelretry", `package main

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/otelretry"
)

func main() {
	in := otelretry.New()
	defer in.Close()
	attempts := 0
	err := retry.Do(context.Background(), retry.NewStandard(retry.StandardOptions{}), func(context.Context) error {
		attempts++
		if attempts == 1 {
			return retry.Transient(errors.New("first attempt fails"))
		}
		return nil
	}, in.Option())
	if err != nil || attempts != 2 {
		log.Fatalf("retry.Do with otelretry: %v after %d attempts", err, attempts)
	}
	fmt.Println("ok: otelretry instrumented", attempts, "attempts")
}
`, "ok: otelretry"},
	{"redisquota", `package main

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/redisquota"
)

func main() {
	// No Redis listens on port 1: the quota falls back to a local one.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	q := redisquota.New(client, "trial", redisquota.Options{Timeout: 50 * time.Millisecond})
	defer q.Close()
	fmt.Println("ok: redisquota, a retry allowed without Redis:", q.Take(1), "shared:", q.Shared())
}
`, "ok: redisquota"},
	{"sqlretry", `package main

import (
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

func main() {
	info := sqlretry.Classify(&pgconn.PgError{Code: "40001"})
	if info.Safety != retry.Safe {
		log.Fatalf("a serialization failure: %v, want safe to run again", info.Safety)
	}
	fmt.Println("ok: sqlretry classifies SQLSTATE 40001 as", info.Safety)
}
`, "ok: sqlretry"},
}

// verify applies v to a copy of the tree at root, builds a file proxy from
// it, and proves the release as a user would meet it. Scratch files go
// under work.
func verify(ctx context.Context, tc *toolchain, root, v, work string) error {
	start := time.Now()
	tree := filepath.Join(work, "tree")
	if err := snapshot(ctx, root, tree); err != nil {
		return err
	}
	fmt.Fprintf(tc.Log, "verify %s: a copy of the tree in %s\n", v, tree)
	if _, err := apply(ctx, tc, tree, v, work); err != nil {
		return err
	}
	ws, err := loadWorkspace(tree)
	if err != nil {
		return err
	}
	fmt.Fprintf(tc.Log, "apply: done (%.1fs)\n", time.Since(start).Seconds())

	// Push the tags in order: each module builds and vets alone, the
	// workspace off, against a proxy holding only the tags before its own
	// and its own.
	proxyDir := filepath.Join(work, "proxy")
	for level, mods := range ws.levels() {
		t := time.Now()
		if err := writeProxy(ctx, tree, proxyDir, mods, v); err != nil {
			return err
		}
		cache, err := freshCache(work, fmt.Sprintf("proof-level%d", level))
		if err != nil {
			return err
		}
		// -trimpath keeps the build cache's keys free of the module cache's
		// directory, so that a fresh cache per level compiles grpc and the
		// like once, not once per level. (-mod=readonly: go.sum must be
		// complete, test dependencies included, as tidy left it.)
		env := append(tc.env(proxyDir, cache), "GOFLAGS=-modcacherw -trimpath -mod=readonly")
		var tags []string
		for _, m := range mods {
			tags = append(tags, m.Tag(v))
			dir := filepath.Join(tree, filepath.FromSlash(m.Dir))
			if _, err := run(ctx, env, dir, "go", "build", "./..."); err != nil {
				return err
			}
			if _, err := run(ctx, env, dir, "go", "vet", "./..."); err != nil {
				return err
			}
		}
		os.RemoveAll(cache)
		fmt.Fprintf(tc.Log, "proof: tags %s pushed; each builds and vets alone, workspace off (%.1fs)\n", strings.Join(tags, ", "), time.Since(t).Seconds())
	}

	// go install ...@v, in an empty directory.
	t := time.Now()
	cache, err := freshCache(work, "proof-install")
	if err != nil {
		return err
	}
	empty := filepath.Join(work, "empty")
	bin := filepath.Join(work, "bin")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		return err
	}
	env := append(tc.env(proxyDir, cache), "GOBIN="+bin, "GOFLAGS=-modcacherw -trimpath")
	cmdPath := ws.modulePath("cmd/retry")
	if _, err := run(ctx, env, empty, "go", "install", cmdPath+"@"+v); err != nil {
		return err
	}
	out, err := run(ctx, env, empty, filepath.Join(bin, "retry"), "--version")
	if err != nil {
		return err
	}
	if got, want := strings.TrimSpace(string(out)), "retry "+v; got != want {
		return fmt.Errorf("retry --version printed %q, want %q", got, want)
	}
	fmt.Fprintf(tc.Log, "proof: go install %s@%s; retry --version prints %q (%.1fs)\n", cmdPath, v, strings.TrimSpace(string(out)), time.Since(t).Seconds())

	// A program for each library module, in a module of its own; then all
	// of them in one module that gets every library module at once, as an
	// application using several would.
	var all []string
	for _, tr := range trials {
		t := time.Now()
		path := ws.modulePath(tr.Dir) + "@" + v
		all = append(all, path)
		dir := filepath.Join(work, "trial-"+strings.ReplaceAll(tr.Dir, "/", "-"))
		out, err := runTrial(ctx, env, dir, []string{path}, []trial{tr})
		if err != nil {
			return err
		}
		said := ""
		for line := range strings.Lines(out) {
			if strings.Contains(line, tr.Want) { // not the programs' logs
				said = strings.TrimSpace(line)
			}
		}
		fmt.Fprintf(tc.Log, "proof: go get %s alone, then build and run: %s (%.1fs)\n", path, said, time.Since(t).Seconds())
	}
	t = time.Now()
	if _, err := runTrial(ctx, env, filepath.Join(work, "trial-all"), all, trials); err != nil {
		return err
	}
	fmt.Fprintf(tc.Log, "proof: go get of all %d library modules in one module, then build and run each program (%.1fs)\n", len(trials), time.Since(t).Seconds())
	os.RemoveAll(cache)
	fmt.Fprintf(tc.Log, "verify %s: ok (%.0fs)\n", v, time.Since(start).Seconds())
	return nil
}

// runTrial makes a module in dir that gets the modules gets, holding the
// programs of trials (each its own main package), then builds and runs
// each program and checks what it prints. It returns the output.
func runTrial(ctx context.Context, env []string, dir string, gets []string, trials []trial) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for i, tr := range trials {
		pkg := filepath.Join(dir, fmt.Sprintf("p%d", i))
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(pkg, "main.go"), []byte(tr.Program), 0o644); err != nil {
			return "", err
		}
	}
	steps := [][]string{
		{"mod", "init", "example.com/trial"},
		append([]string{"get"}, gets...),
		{"mod", "tidy"},
	}
	for _, s := range steps {
		if _, err := run(ctx, env, dir, "go", s...); err != nil {
			return "", err
		}
	}
	var all strings.Builder
	for i, tr := range trials {
		bin := filepath.Join(dir, fmt.Sprintf("trial%d", i))
		if _, err := run(ctx, env, dir, "go", "build", "-o", bin, fmt.Sprintf("./p%d", i)); err != nil {
			return "", err
		}
		out, err := run(ctx, env, dir, bin)
		if err != nil {
			return "", err
		}
		if !strings.Contains(string(out), tr.Want) {
			return "", fmt.Errorf("%s: the program printed %q, want a line with %q", dir, out, tr.Want)
		}
		all.Write(out)
	}
	return all.String(), nil
}
