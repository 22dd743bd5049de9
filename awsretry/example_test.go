package awsretry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/awsretry"
)

// A DynamoDB client whose retries retrykit decides: the first answer is a
// 500, the retry succeeds.
func Example() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if n.Add(1) == 1 {
			w.WriteHeader(500)
			fmt.Fprint(w, `{"__type":"InternalServerError","message":"try again"}`)
			return
		}
		fmt.Fprint(w, `{"TableNames":["orders"]}`)
	}))
	defer srv.Close()

	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer: awsretry.New(awsretry.Options{
			Breaker: retry.NewBreaker(retry.BreakerOptions{}),
		}),
	})
	out, err := client.ListTables(context.Background(), &dynamodb.ListTablesInput{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.TableNames, "after", n.Load(), "requests")
	// Output: [orders] after 2 requests
}
