package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry/pgtest"
)

var dsn, noServer string

func TestMain(m *testing.M) {
	runtime.LockOSThread() // the server dies with this thread: see pgtest.Start
	c, err := pgtest.Start(context.Background())
	switch {
	case pgtest.Missing(err) && !pgtest.Required():
		noServer = err.Error()
		os.Exit(m.Run())
	case err != nil:
		fmt.Fprintln(os.Stderr, "transfer test needs PostgreSQL:", err)
		os.Exit(1)
	}
	dsn = c.DSN
	code := m.Run()
	c.Stop()
	os.Exit(code)
}

func TestRun(t *testing.T) {
	if dsn == "" {
		t.Skip(noServer)
	}
	var out strings.Builder
	err := run(t.Context(), &out, dsn, 16, 20)
	if errors.Is(err, retry.ErrMaxAttempts) && isCode(err, "40001") {
		// A transfer met a conflict on each of its 10 runs, which 16
		// workers on 4 accounts can do on a loaded machine; run gives up
		// then without its report, and no transfer may have been applied
		// in part.
		t.Logf("a transfer gave up: %v", err)
		checkTotal(t, 4000)
		return
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "total balance: 4000 (was 4000)") {
		t.Fatal(out.String())
	}
}

// checkTotal fails the test unless the accounts hold want in all.
func checkTotal(t *testing.T, want int64) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var total int64
	if err := conn.QueryRow(t.Context(), "SELECT sum(balance) FROM transfer_accounts").Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != want {
		t.Fatalf("total balance %d, want %d: money was created or lost", total, want)
	}
}

// isCode reports whether err wraps a *pgconn.PgError with code.
func isCode(err error, code string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == code
}
