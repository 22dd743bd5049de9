package redisquota_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// watchedLogs is logs that a test can wait on: the quota's records are the
// events of its falling back and rejoining.
type watchedLogs struct {
	logs
	mu      sync.Mutex
	changed chan struct{} // closed at the next record
}

func (l *watchedLogs) Handle(ctx context.Context, r slog.Record) error {
	err := l.logs.Handle(ctx, r)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return err
}

func (l *watchedLogs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *watchedLogs) WithGroup(string) slog.Handler      { return l }

// await waits for a record that contains s, failing the test after 10 s.
func (l *watchedLogs) await(t *testing.T, s string) {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		if l.count(s) > 0 {
			l.mu.Unlock()
			return
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("no record of %q within 10 s; records:\n%s", s, l)
		}
	}
}
