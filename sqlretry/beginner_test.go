package sqlretry_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrykit/retry/sqlretry"
)

// Both of pgx's handles are Beginners.
var (
	_ sqlretry.Beginner = (*pgxpool.Pool)(nil)
	_ sqlretry.Beginner = (*pgx.Conn)(nil)
)

// PgxTx runs on a single *pgx.Conn as on a pool, and the connection is
// usable afterwards, a rolled-back transaction included.
func TestPgxConn(t *testing.T) {
	needServer(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	exec(t, "DROP TABLE IF EXISTS pgx_conn", "CREATE TABLE pgx_conn (k int PRIMARY KEY)")
	insert := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO pgx_conn VALUES (1)")
		return err
	}
	if err := sqlretry.PgxTx(t.Context(), conn, insert); err != nil {
		t.Fatal(err)
	}
	if err := sqlretry.PgxTx(t.Context(), conn, insert); !isCode(err, "23505") {
		t.Fatalf("the second insert: %v, want a unique violation", err)
	}
	if err := sqlretry.PgxTx(t.Context(), conn, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO pgx_conn VALUES (2)")
		return err
	}); err != nil {
		t.Fatalf("after a rolled-back transaction: %v", err)
	}
	if n := queryInt(t, "SELECT count(*) FROM pgx_conn"); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
}
