// Command dynamodb shows awsretry deciding the retries of the AWS SDK for
// Go v2, against a loopback server that speaks DynamoDB's JSON 1.0 protocol
// and fails as a service in trouble does: throttles, 500s, then an outage.
//
//	go run ./awsretry/examples/dynamodb
//
// It prints, for each phase, what the client saw and how many requests
// reached the server: the SDK's loop makes the attempts and waits, and
// retrykit's strategy and breaker decide them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/awsretry"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dynamodb:", err)
		os.Exit(1)
	}
}

// service is a loopback DynamoDB whose answers the phases choose.
type service struct {
	requests atomic.Int64
	answer   atomic.Value // func(n int64) (status int, errorType string)
}

func (s *service) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	n := s.requests.Add(1)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	status, errType := s.answer.Load().(func(int64) (int, string))(n)
	if status != http.StatusOK {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"simulated"}`, errType)
		return
	}
	io.WriteString(w, `{"TableNames":["orders"]}`)
}

func run(ctx context.Context, out io.Writer) error {
	svc := &service{}
	srv := httptest.NewServer(svc)
	defer srv.Close()

	breaker := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 5})
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer: awsretry.New(awsretry.Options{
			// Waits short enough for an example; the default backs off
			// from 50 ms, and from 1 s after a throttle.
			Strategy: retry.NewAdaptive(retry.AdaptiveOptions{StandardOptions: retry.StandardOptions{
				Backoff: retry.Constant(0), ThrottleBackoff: retry.Constant(0),
			}}),
			Breaker: breaker,
		}),
	})
	call := func(phase string) {
		before := svc.requests.Load()
		_, err := client.ListTables(ctx, &dynamodb.ListTablesInput{})
		sent := svc.requests.Load() - before
		switch {
		case err == nil:
			fmt.Fprintf(out, "%-34s ok after %d requests\n", phase, sent)
		case errors.Is(err, retry.ErrCircuitOpen):
			fmt.Fprintf(out, "%-34s refused by the open circuit, %d requests sent\n", phase, sent)
		default:
			var re *retry.Error
			reason := "not retried"
			if errors.As(err, &re) {
				reason = re.Reason.Error()
			}
			fmt.Fprintf(out, "%-34s failed after %d requests (%s)\n", phase, sent, reason)
		}
	}

	// A throttle, then a success: retried as the SDK would, after the
	// throttle's own backoff.
	svc.answer.Store(func(n int64) (int, string) {
		if n%2 == 1 {
			return http.StatusBadRequest, "ThrottlingException"
		}
		return http.StatusOK, ""
	})
	call("a throttle, then a success:")

	// A client fault is the caller's to fix: never retried.
	svc.answer.Store(func(int64) (int, string) { return http.StatusBadRequest, "ValidationException" })
	call("a validation error:")

	// Inside the application's own retry.Do, an answered failure is one
	// request per outer attempt: 3, not 3 x 3.
	svc.answer.Store(func(int64) (int, string) { return http.StatusInternalServerError, "InternalServerError" })
	before := svc.requests.Load()
	err := retry.Do(ctx, &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}, func(ctx context.Context) error {
		_, err := client.ListTables(ctx, &dynamodb.ListTablesInput{})
		return err
	})
	if err == nil {
		return errors.New("a service answering 500 to every request: the call succeeded")
	}
	fmt.Fprintf(out, "%-34s %d requests for 3 outer attempts\n", "500s under the caller's retry.Do:", svc.requests.Load()-before)

	// An outage: the breaker opens, and calls fail at once, sending nothing.
	for range 3 {
		call("an outage:")
	}
	return nil
}
