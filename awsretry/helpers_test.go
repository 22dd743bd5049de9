package awsretry_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/retrykit/retry"
)

// A service is a loopback server speaking an AWS protocol; answer decides
// the n-th request's answer (n counts from 1).
type service struct {
	*httptest.Server
	requests atomic.Int64
}

// newService starts a loopback server whose handler answers request n.
func newService(t testing.TB, answer func(w http.ResponseWriter, r *http.Request, n int64)) *service {
	t.Helper()
	s := &service{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(w, r, s.requests.Add(1))
	}))
	// Many clients at once share the test's connections: a dial per
	// request would overflow the listener's backlog and time the kernel's
	// SYN retries instead of the retryers.
	s.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 1024
	t.Cleanup(s.Close)
	return s
}

// firstAttempt reports whether r is a call's first attempt, as the SDK's
// Amz-Sdk-Request header says.
func firstAttemptOf(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Amz-Sdk-Request"), "attempt=1;") || r.Header.Get("Amz-Sdk-Request") == "attempt=1"
}

// DynamoDB's JSON 1.0 answers.

func ddbItem(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	fmt.Fprint(w, `{"Item":{"id":{"S":"k"},"v":{"N":"1"}}}`)
}

func ddbError(w http.ResponseWriter, status int, code string, header ...string) {
	for i := 0; i+1 < len(header); i += 2 {
		w.Header().Set(header[i], header[i+1])
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"%s from the test service"}`, code, code)
}

// s3Error writes S3's REST-XML error.
func s3Error(w http.ResponseWriter, status int, code string, header ...string) {
	for i := 0; i+1 < len(header); i += 2 {
		w.Header().Set(header[i], header[i+1])
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s from the test service</Message><RequestId>r1</RequestId></Error>`, code, code)
}

// reset closes the connection of r without an answer, with a TCP RST.
func reset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// ddb returns a DynamoDB client of s with retryer r.
func ddb(s *service, r aws.Retryer) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer:      r,
		HTTPClient:   s.Client(),
	})
}

// s3c returns an S3 client of s with retryer r.
func s3c(s *service, r aws.Retryer) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer:      r,
		UsePathStyle: true,
		HTTPClient:   s.Client(),
	})
}

func getItem(ctx context.Context, c *dynamodb.Client) error {
	_, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("t"),
		Key:       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}},
	})
	return err
}

// fast is a strategy whose waits are a millisecond: the SDK's loop sleeps
// them for real (see the package's tests of timing).
func fast() *retry.Adaptive {
	return retry.NewAdaptive(retry.AdaptiveOptions{StandardOptions: retry.StandardOptions{
		Backoff: retry.Constant(time.Millisecond), ThrottleBackoff: retry.Constant(time.Millisecond),
	}})
}

// sdkStandard is the SDK's standard retryer with its quota as shipped and
// waits of a millisecond.
func sdkStandard() aws.Retryer {
	return sdkretry.NewStandard(func(o *sdkretry.StandardOptions) {
		o.Backoff = sdkretry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	})
}

type dynamodbOptions = dynamodb.Options

func itemInput() *dynamodb.GetItemInput {
	return &dynamodb.GetItemInput{
		TableName: aws.String("t"),
		Key:       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}},
	}
}
