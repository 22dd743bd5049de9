package otelretry_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/otelretry"
)

// TestGauges observes a Standard's quota, an Adaptive's send rate, a shared
// quota and a budget, for the scopes the instrumentation has seen.
func TestGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		std := retry.NewStandard(retry.StandardOptions{MaxAttempts: 2})
		ad := retry.NewAdaptive(retry.AdaptiveOptions{})
		shared := retry.NewTokenBucket(100)
		shared.Take(30)
		budget := retry.NewBudget(retry.BudgetOptions{})
		inst := r.inst(otelretry.WithStrategy("std", std), otelretry.WithStrategy("ad", ad),
			otelretry.WithQuota("shared", shared), otelretry.WithBudget("fleet", budget))
		defer inst.Close()
		ctx := context.Background()

		// One retry paid from the Standard's quota in scope std.
		_ = retry.Do(ctx, std, func(context.Context) error { return retry.Transient(errBoom) },
			retry.Scope("std"), inst.Option())
		// A throttle makes the Adaptive's limiter limit scope ad.
		n := 0
		_ = retry.Do(ctx, ad, func(context.Context) error {
			if n++; n == 1 {
				return retry.Throttled(errBoom)
			}
			return nil
		}, retry.Scope("ad"), inst.Option())
		rate, limiting := ad.Rate("ad")
		if !limiting {
			t.Fatal("the Adaptive does not limit after a throttle: the send-rate gauge cannot be tested")
		}

		m := r.metrics(t)
		want := map[string]string{
			"retry.client.quota.available{retry.scope=std,retry.strategy=std}": fmt.Sprint(std.Available("std")),
			"retry.client.quota.available{retry.scope=ad,retry.strategy=std}":  fmt.Sprint(std.Available("ad")),
			"retry.client.quota.available{retry.quota=shared}":                 "70",
			"retry.client.budget.available{retry.budget=fleet}":                fmt.Sprint(budget.Available()),
			"retry.client.send_rate{retry.scope=ad,retry.strategy=ad}":         fmt.Sprintf("%.3g", rate),
		}
		if std.Available("std") != retry.DefaultBucketCapacity-retry.DefaultRetryCost {
			t.Errorf("std quota %d, want one retry's cost taken", std.Available("std"))
		}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%s = %q, want %q", k, m[k], v)
			}
		}
		// The Adaptive has no quota (Available is math.MaxInt) and does not
		// limit scope std: neither is observed.
		for _, k := range []string{"retry.client.send_rate{retry.scope=std,retry.strategy=ad}",
			"retry.client.quota.available{retry.scope=ad,retry.strategy=ad}"} {
			if v, ok := m[k]; ok {
				t.Errorf("%s = %s, want no observation", k, v)
			}
		}
		for k, v := range m {
			if v == fmt.Sprint(int64(^uint64(0)>>1)) {
				t.Errorf("%s observes math.MaxInt, the mark of no quota", k)
			}
		}
	})
}

// TestGaugesSkipFoldedScopes: the scopes folded into OtherScope have no one
// value, so their gauges are not observed.
func TestGaugesSkipFoldedScopes(t *testing.T) {
	r := newRig(t)
	std := retry.NewStandard(retry.StandardOptions{})
	inst := r.inst(otelretry.WithStrategy("std", std), otelretry.WithMaxScopes(1))
	defer inst.Close()
	for _, scope := range []string{"a", "b"} {
		_ = retry.Do(context.Background(), std, func(context.Context) error { return nil }, retry.Scope(scope), inst.Option())
	}
	m := r.metrics(t)
	if m["retry.client.quota.available{retry.scope=a,retry.strategy=std}"] == "" {
		t.Errorf("scope a not observed: %v", m)
	}
	for _, k := range []string{"retry.client.quota.available{retry.scope=b,retry.strategy=std}",
		"retry.client.quota.available{retry.scope=_other,retry.strategy=std}"} {
		if v, ok := m[k]; ok {
			t.Errorf("%s = %s, want no observation", k, v)
		}
	}
}
