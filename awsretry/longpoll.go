package awsretry

import (
	"context"
	"time"

	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
)

// longPolled are the operations AWS's SDKs treat as long polling, by
// service ID: a consumer calls them in a loop, and one that fails at once
// is called again at once.
var longPolled = map[string]map[string]bool{
	"SQS": {"ReceiveMessage": true},
	"SFN": {"GetActivityTask": true},
	"SWF": {"PollForActivityTask": true, "PollForDecisionTask": true},
}

// LongPolling reports whether the call whose attempt has ctx is one of the
// operations AWS's SDKs treat as long polling: SQS's ReceiveMessage, Step
// Functions' GetActivityTask, and SWF's PollForActivityTask and
// PollForDecisionTask. It is the default of Options.LongPoll.
func LongPolling(ctx context.Context) bool {
	return longPolled[awsmiddle.GetServiceID(ctx)][awsmiddle.GetOperationName(ctx)]
}

// polls reports whether the call whose attempt has ctx polls.
func (r *Retryer) polls(ctx context.Context) bool {
	if r.longPoll != nil {
		return r.longPoll(ctx)
	}
	return LongPolling(ctx)
}

// pollWait is the wait of a polling call before its refusal returns: d,
// the backoff the refused retry would have had or the time the circuit
// goes on refusing, or until ctx is done if sooner (its deadline), as
// retry.LongPoll waits in retry.Do. The SDK's own loop makes no such wait
// for a retryer of its caller's: without it, a consumer whose calls are
// refused polls again at once, and its first attempts, which no quota
// holds back, reach the failing service as fast as the loop runs.
func pollWait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
