package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
	"github.com/retrykit/retry/sqlretry/pgtest"
)

var dsn, noServer string

func TestMain(m *testing.M) {
	runtime.LockOSThread() // the server dies with this thread: see pgtest.Start
	// Deadlocks among the transfers are found after 20 ms, not 1 s.
	c, err := pgtest.Start(context.Background(), "deadlock_timeout=20ms")
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
	if err := run(t.Context(), &out, dsn, 16, 20); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "total balance: 4000 (was 4000)") {
		t.Fatal(out.String())
	}
	checkTotal(t, 4000)
}

// A transfer that gives up after conflicts does not end the run: with one
// run per transfer, 16 workers on 4 accounts give up often, and the run
// still makes the other transfers, counts the give-ups and keeps the total.
func TestGiveUpsDoNotEndTheRun(t *testing.T) {
	if dsn == "" {
		t.Skip(noServer)
	}
	var out strings.Builder
	once := sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 1})
	if err := run(t.Context(), &out, dsn, 16, 10, once); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	var committed, refused, gaveUp int
	if _, err := fmt.Sscanf(out.String(), "%d transfers committed, %d refused for insufficient funds, %d gave up after conflicts",
		&committed, &refused, &gaveUp); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if gaveUp == 0 || committed+refused+gaveUp != 16*10 {
		t.Fatalf("%d committed, %d refused, %d gave up; want some give-ups and 160 in all", committed, refused, gaveUp)
	}
	checkTotal(t, 4000)
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
