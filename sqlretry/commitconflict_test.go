package sqlretry_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// A conflict that PostgreSQL reports at COMMIT is a conflict like any other:
// the transaction is run again. The on-call doctors once more, under
// SERIALIZABLE, in an order that puts the failure at COMMIT: both read, both
// update, the first commits (which dooms the second), and only then does the
// second return from fn, so that its COMMIT fails with 40001. Its run again
// sees one doctor left and leaves them on call.
func TestConflictAtCommit(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		exec(t, "DROP TABLE IF EXISTS "+table,
			"CREATE TABLE "+table+" (name text PRIMARY KEY, on_call bool NOT NULL)",
			"INSERT INTO "+table+" VALUES ('alice', true), ('bob', true)")
		read, wrote := newBarrier(2), newBarrier(2)
		var (
			runs   atomic.Int64
			mu     sync.Mutex
			stages []string // the failed runs' errors, up to the driver's
			wg     sync.WaitGroup
		)
		record := retry.OnAttemptFailed(func(_ context.Context, _ int, err error) {
			mu.Lock()
			defer mu.Unlock()
			stage := "in fn"
			if strings.HasPrefix(err.Error(), "sqlretry: commit: ") {
				stage = "at commit"
			}
			code := "none"
			if isCode(err, "40001") {
				code = "40001"
			}
			stages = append(stages, code+" "+stage)
		})
		errs := make([]error, 2)
		ended := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
		for i, name := range []string{"alice", "bob"} {
			wg.Go(func() {
				defer close(ended[i])
				first := true
				errs[i] = a.run(t.Context(), func(ctx context.Context, tx q) error {
					runs.Add(1)
					n, err := tx.Int(ctx, "SELECT count(*) FROM "+table+" WHERE on_call")
					if err != nil {
						return err
					}
					if !first {
						if n < 2 {
							return nil
						}
						return tx.Exec(ctx, "UPDATE "+table+" SET on_call = false WHERE name = $1", name)
					}
					first = false
					read.wait(t)
					if err := tx.Exec(ctx, "UPDATE "+table+" SET on_call = false WHERE name = $1", name); err != nil {
						return err
					}
					wrote.wait(t)
					if i == 1 { // bob commits only after alice's call has ended
						return afterOther(ctx, ended[0])
					}
					return nil
				}, a.iso("serializable"), sqlretry.WithRetryOptions(record))
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		onCall := queryInt(t, "SELECT count(*) FROM "+table+" WHERE on_call")
		t.Logf("%d runs, failures %v, %d on call", runs.Load(), stages, onCall)
		if onCall != 1 || runs.Load() != 3 || !slices.Equal(stages, []string{"40001 at commit"}) {
			t.Fatalf("%d on call after %d runs, failures %v; want 1 after 3, one 40001 at commit", onCall, runs.Load(), stages)
		}
	})
}
