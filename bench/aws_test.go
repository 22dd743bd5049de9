package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/awsretry"
)

// BenchmarkAWSGetItem measures one DynamoDB GetItem through the SDK's
// client against a loopback server speaking JSON 1.0, with the SDK's own
// standard and adaptive retryers and with awsretry's Retryer (its default
// strategy, and a Standard one): "success" is answered at once,
// "two-retries" after two 500s, with no wait between attempts. Two failures
// of three attempts drain every quota and trip every storm guard, so the
// retryers here have theirs off (ratelimit.None; no streak, client-side
// throttling or limit of a bucket): what is measured is the cost of a
// decision, not a refusal.
func BenchmarkAWSGetItem(b *testing.B) {
	noWait := sdkretry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	retryers := []struct {
		name string
		new  func() aws.Retryer
	}{
		{"sdk-standard", func() aws.Retryer {
			return sdkretry.NewStandard(func(o *sdkretry.StandardOptions) { o.Backoff, o.RateLimiter = noWait, ratelimit.None })
		}},
		{"sdk-adaptive", func() aws.Retryer {
			return sdkretry.NewAdaptiveMode(func(o *sdkretry.AdaptiveModeOptions) {
				o.StandardOptions = append(o.StandardOptions, func(o *sdkretry.StandardOptions) { o.Backoff, o.RateLimiter = noWait, ratelimit.None })
			})
		}},
		{"awsretry", func() aws.Retryer {
			return awsretry.New(awsretry.Options{Strategy: retry.NewAdaptive(retry.AdaptiveOptions{Streak: -1, Multiplier: -1,
				StandardOptions: retry.StandardOptions{Backoff: retry.Constant(0), ThrottleBackoff: retry.Constant(0)}})})
		}},
		{"awsretry-standard", func() aws.Retryer {
			return awsretry.New(awsretry.Options{Strategy: retry.NewStandard(retry.StandardOptions{Backoff: retry.Constant(0), Capacity: 1 << 30})})
		}},
	}
	for _, failures := range []int64{0, 2} {
		scenario := "success"
		if failures > 0 {
			scenario = "two-retries"
		}
		for _, r := range retryers {
			b.Run(scenario+"/"+r.name, func(b *testing.B) {
				var n atomic.Int64
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "application/x-amz-json-1.0")
					if n.Add(1)%(failures+1) != 0 {
						w.WriteHeader(500)
						fmt.Fprint(w, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"m"}`)
						return
					}
					fmt.Fprint(w, `{"Item":{"id":{"S":"k"}}}`)
				}))
				defer srv.Close()
				c := dynamodb.New(dynamodb.Options{
					Region:       "us-east-1",
					BaseEndpoint: aws.String(srv.URL),
					Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
					Retryer:      r.new(),
					HTTPClient:   srv.Client(),
				})
				in := &dynamodb.GetItemInput{
					TableName: aws.String("t"),
					Key:       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}},
				}
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.GetItem(ctx, in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
