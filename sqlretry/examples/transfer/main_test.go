package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

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
	if err := run(t.Context(), &out, dsn, 16, 20); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "total balance: 4000 (was 4000)") {
		t.Fatal(out.String())
	}
}
