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

// A run whose outcome is unknown is run again under its key, and the
// transfer is made once. The runs here are put in doubt by a deferred
// trigger that fails the first COMMIT of every seventh transfer with
// SQLSTATE 40003 (statement_completion_unknown, what CockroachDB reports
// for a COMMIT whose result is ambiguous, and which sqlretry leaves in
// doubt): a sequence per transfer, which a rollback does not undo, tells
// its first COMMIT from the next.
func TestRunsInDoubtAreRunAgainUnderTheirKey(t *testing.T) {
	if dsn == "" {
		t.Skip(noServer)
	}
	const workers, transfers = 8, 10
	pool, err := connect(t.Context(), dsn, workers)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := setUp(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	chosen := 0
	for id := 7; id <= workers*transfers; id += 7 {
		if _, err := pool.Exec(t.Context(), fmt.Sprintf("CREATE SEQUENCE IF NOT EXISTS transfer_doubt_%d", id)); err != nil {
			t.Fatal(err)
		}
		chosen++
	}
	if _, err := pool.Exec(t.Context(), `CREATE OR REPLACE FUNCTION transfer_doubt() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF to_regclass('transfer_doubt_' || NEW.id) IS NOT NULL AND nextval('transfer_doubt_' || NEW.id) = 1 THEN
				RAISE EXCEPTION 'result is ambiguous' USING ERRCODE = '40003';
			END IF;
			RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER transfer_doubt AFTER INSERT ON transfer_log
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION transfer_doubt()`); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := transferAll(t.Context(), &out, pool, workers, transfers); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	var committed, refused, gaveUp, conflicts, doubts, before int
	if _, err := fmt.Sscanf(out.String(), "%d transfers committed, %d refused for insufficient funds, %d gave up after conflicts, %d conflicts run again",
		&committed, &refused, &gaveUp, &conflicts); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	_, line, _ := strings.Cut(out.String(), "\n")
	if _, err := fmt.Sscanf(line, "%d runs in doubt, run again under their key: %d transfers had been made", &doubts, &before); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	// A transfer refused for want of funds never reaches its COMMIT's
	// trigger; every other chosen one is in doubt once, and made by its
	// next run (the first committed nothing).
	if doubts == 0 || doubts > chosen || before != 0 || committed+refused+gaveUp != workers*transfers {
		t.Fatalf("%d in doubt (of %d chosen), %d made before; %d committed, %d refused, %d gave up", doubts, chosen, before, committed, refused, gaveUp)
	}
}

// A transfer run again after it committed (as a run in doubt may have)
// fails on its key, which keyTaken tells, and moves nothing more.
func TestTransferRunAgainAfterItCommittedMovesNothing(t *testing.T) {
	if dsn == "" {
		t.Skip(noServer)
	}
	pool, err := connect(t.Context(), dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := setUp(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	tr := transfer{id: 1, from: 1, to: 2, amount: 10}
	if o, _, err := tr.do(t.Context(), pool); err != nil || o != made {
		t.Fatalf("outcome %v, err %v: want made", o, err)
	}
	err = sqlretry.PgxTx(t.Context(), pool, tr.run)
	if !keyTaken(err) {
		t.Fatalf("err %v: want the key taken", err)
	}
	var out strings.Builder
	if err := check(t.Context(), &out, pool, 1); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var balance int64
	if err := pool.QueryRow(t.Context(), "SELECT balance FROM transfer_accounts WHERE id = 1").Scan(&balance); err != nil || balance != initial-10 {
		t.Fatalf("account 1 holds %d (err %v), want %d", balance, err, initial-10)
	}
}
