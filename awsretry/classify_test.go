package awsretry_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/awsretry"
)

// What DynamoDB's answers, as the SDK's client reports them, classify as.
func TestClassifyDynamoDBAnswers(t *testing.T) {
	server := retry.Info{Safety: retry.MaybeSafe, Fault: retry.FaultServer}
	throttle := retry.Info{Safety: retry.Safe, Throttle: true, Fault: retry.FaultServer}
	client := retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}
	cases := []struct {
		name   string
		answer func(w http.ResponseWriter)
		want   retry.Info
	}{
		{"500 InternalServerError", func(w http.ResponseWriter) { ddbError(w, 500, "InternalServerError") }, server},
		{"503 unmodeled", func(w http.ResponseWriter) { ddbError(w, 503, "Whatever") }, server},
		{"501 not retried", func(w http.ResponseWriter) { ddbError(w, 501, "NotImplemented") }, retry.Info{Safety: retry.Unsafe, Fault: retry.FaultServer}},
		{"429 unmodeled", func(w http.ResponseWriter) { ddbError(w, 429, "TooManyRequests") }, throttle},
		{"ProvisionedThroughputExceeded", func(w http.ResponseWriter) { ddbError(w, 400, "ProvisionedThroughputExceededException") }, throttle},
		{"ThrottlingException", func(w http.ResponseWriter) { ddbError(w, 400, "ThrottlingException") }, throttle},
		{"RequestLimitExceeded", func(w http.ResponseWriter) { ddbError(w, 400, "RequestLimitExceeded") }, throttle},
		{"ValidationException", func(w http.ResponseWriter) { ddbError(w, 400, "ValidationException") }, client},
		{"ResourceNotFound", func(w http.ResponseWriter) { ddbError(w, 400, "ResourceNotFoundException") }, client},
		{"ConditionalCheckFailed", func(w http.ResponseWriter) { ddbError(w, 400, "ConditionalCheckFailedException") }, client},
		{"x-amz-retry-after", func(w http.ResponseWriter) { ddbError(w, 503, "ServiceUnavailable", "X-Amz-Retry-After", "1500") },
			retry.Info{Safety: retry.MaybeSafe, Fault: retry.FaultServer, RetryAfter: 1500 * time.Millisecond, Allowed: true}},
		{"Retry-After", func(w http.ResponseWriter) { ddbError(w, 400, "ThrottlingException", "Retry-After", "2") },
			retry.Info{Safety: retry.Safe, Throttle: true, Fault: retry.FaultServer, RetryAfter: 2 * time.Second, Allowed: true}},
		{"bad Retry-After", func(w http.ResponseWriter) { ddbError(w, 500, "InternalServerError", "Retry-After", "soon") }, server},
		{"reset", reset, server},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { tc.answer(w) })
			err := getItem(context.Background(), ddb(s, aws.NopRetryer{}))
			if err == nil {
				t.Fatal("no error")
			}
			if got := awsretry.Classify(err); got != tc.want {
				t.Fatalf("Classify(%v) = %+v, want %+v", err, got, tc.want)
			}
		})
	}
}

// What S3's REST-XML answers classify as.
func TestClassifyS3Answers(t *testing.T) {
	cases := []struct {
		code   string
		status int
		want   retry.Info
	}{
		{"NoSuchKey", 404, retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}},
		{"AccessDenied", 403, retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}},
		{"SlowDown", 503, retry.Info{Safety: retry.Safe, Throttle: true, Fault: retry.FaultServer}},
		{"InternalError", 500, retry.Info{Safety: retry.MaybeSafe, Fault: retry.FaultServer}},
		{"RequestTimeout", 400, retry.Info{Safety: retry.MaybeSafe, Fault: retry.FaultServer}},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { s3Error(w, tc.status, tc.code) })
			_, err := s3c(s, aws.NopRetryer{}).GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
			if err == nil {
				t.Fatal("no error")
			}
			if got := awsretry.Classify(err); got != tc.want {
				t.Fatalf("Classify(%v) = %+v, want %+v", err, got, tc.want)
			}
		})
	}
}

// Failures with no answer: a refused connection never left (Safe), a slow
// answer past the HTTP client's timeout is a server timeout, and the
// caller's cancellation is nothing to retry.
func TestClassifyFailuresWithoutAnswer(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { ddbItem(w) })
		c := ddb(s, aws.NopRetryer{})
		s.Close()
		err := getItem(context.Background(), c)
		if got := awsretry.Classify(err); got.Safety != retry.Safe || !got.Retryable() {
			t.Fatalf("Classify(%v) = %+v, want Safe", err, got)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { <-release; ddbItem(w) })
		defer close(release)
		hc := s.Client()
		hc.Timeout = 20 * time.Millisecond
		c := ddb(s, aws.NopRetryer{})
		_, err := c.GetItem(context.Background(), itemInput(), func(o *dynamodbOptions) { o.HTTPClient = hc })
		if got := awsretry.Classify(err); !got.Timeout || got.Fault != retry.FaultServer {
			t.Fatalf("Classify(%v) = %+v, want a server timeout", err, got)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		release := make(chan struct{})
		s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { <-release; ddbItem(w) })
		defer close(release)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Millisecond, cancel)
		err := getItem(ctx, ddb(s, awsretry.New(awsretry.Options{})))
		if got := awsretry.Classify(err); got.Retryable() || got.Fault != retry.FaultClient {
			t.Fatalf("Classify(%v) = %+v, want the caller's", err, got)
		}
		if s.requests.Load() != 1 {
			t.Fatalf("requests = %d, want 1", s.requests.Load())
		}
	})
}

// The service's wait is a floor: a retry never comes sooner than its
// x-amz-retry-after or Retry-After asks, though the strategy's own wait is
// a millisecond.
func TestRetryNeverSoonerThanAsked(t *testing.T) {
	for _, h := range [][2]string{{"X-Amz-Retry-After", "300"}, {"Retry-After", "1"}} {
		t.Run(h[0], func(t *testing.T) {
			var first time.Time
			var gap time.Duration
			s := newService(t, func(w http.ResponseWriter, _ *http.Request, n int64) {
				if n == 1 {
					first = time.Now()
					ddbError(w, 503, "ServiceUnavailable", h[0], h[1])
					return
				}
				gap = time.Since(first)
				ddbItem(w)
			})
			if err := getItem(context.Background(), ddb(s, awsretry.New(awsretry.Options{Strategy: fast()}))); err != nil {
				t.Fatal(err)
			}
			want := 300 * time.Millisecond
			if h[0] == "Retry-After" {
				want = time.Second
			}
			if gap < want {
				t.Fatalf("retried after %v, asked for %v", gap, want)
			}
		})
	}
}

// S3's PutObject is retried after a reset with its body whole: the SDK
// rewinds it, the Retryer decides.
func TestS3PutRetriedAfterReset(t *testing.T) {
	var bodies []string
	s := newService(t, func(w http.ResponseWriter, r *http.Request, n int64) {
		var b bytes.Buffer
		_, _ = b.ReadFrom(r.Body)
		bodies = append(bodies, b.String())
		if n == 1 {
			reset(w)
			return
		}
		w.Header().Set("ETag", `"e"`)
	})
	_, err := s3c(s, awsretry.New(awsretry.Options{Strategy: fast()})).PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String("b"), Key: aws.String("k"), Body: strings.NewReader("payload"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 2 || !strings.Contains(bodies[1], "payload") {
		t.Fatalf("bodies = %q, want the payload twice", bodies)
	}
}

var _ = errors.Is
