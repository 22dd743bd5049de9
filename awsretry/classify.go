package awsretry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/retrykit/retry"
)

// transientCodes are the error codes of a service's own failure that the
// SDK retries (RequestTimeout, RequestTimeoutException) and those AWS
// services answer an internal failure with, whatever their status.
var transientCodes = map[string]bool{
	"RequestTimeout":              true,
	"RequestTimeoutException":     true,
	"InternalError":               true,
	"InternalFailure":             true,
	"InternalServerError":         true,
	"InternalServerException":     true,
	"ServiceUnavailable":          true,
	"ServiceUnavailableException": true,
}

// retryableStatuses are the statuses of a service's failure that may be
// retried: the SDK's own (DefaultRetryableHTTPStatusCodes). Another 5xx
// (501 Not Implemented, 505) is the server's fault but would fail again.
var retryableStatuses = sdkretry.DefaultRetryableHTTPStatusCodes

// Classify reports what err, an error of an AWS SDK call or of one of its
// attempts, says about retrying it, as this package's Retryer judges it:
//
//   - a throttle (HTTP 429, or any throttling code the SDK knows:
//     sdkretry.DefaultThrottleErrorCodes) is Safe, Throttle, a server fault;
//   - a service's failure (HTTP 500, 502, 503, 504, or the codes
//     RequestTimeout, RequestTimeoutException, InternalError,
//     InternalFailure, InternalServerError, ServiceUnavailable) is
//     MaybeSafe with a server fault, which the strategies retry;
//   - a connection that could not be made is Safe; one reset or cut
//     short after the request left, or an answer that did not arrive
//     whole, is MaybeSafe with a server fault; a network timeout is a
//     timeout with a server fault;
//   - an answered client fault (a 4xx other than 429: validation,
//     ResourceNotFoundException, NoSuchKey, ConditionalCheckFailedException)
//     is Unsafe with a client fault: the service is at work, so
//     retry.Adaptive counts it as an accepted attempt;
//   - the caller's cancellation or deadline is Unsafe with a client fault,
//     which the strategies and breakers count as nothing.
//
// A retryable answer's x-amz-retry-after (milliseconds) or Retry-After
// (RFC 9110, section 10.2.3: seconds or an HTTP date) becomes RetryAfter,
// the wait the retry never comes sooner than, and marks it Allowed.
//
// Anything else is the zero Info, which no strategy retries. The SDK's own
// retryer retries some failures this does not: an error whose
// RetryableError method says so (a clock-skew error the SDK detected is
// retried here too), and codes added with sdkretry.AddWithErrorCodes, which
// a Retryer of this package does not consult: give them to
// Options.RetryableCodes instead.
func Classify(err error) retry.Info {
	return classify(err, nil)
}

// classify is Classify with the caller's extra transient codes.
func classify(err error, extra map[string]bool) retry.Info {
	if err == nil {
		return retry.Info{}
	}
	var (
		status int
		header http.Header
		code   string
		fault  smithy.ErrorFault
	)
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
		if re.Response != nil && re.Response.Response != nil {
			header = re.Response.Header
		}
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code, fault = ae.ErrorCode(), ae.ErrorFault()
	}
	var canceled interface{ CanceledError() bool }
	var retryable interface{ RetryableError() bool }
	var info retry.Info
	switch {
	case errors.As(err, &canceled) && canceled.CanceledError(),
		status == 0 && code == "" && errors.Is(err, context.Canceled):
		return retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}
	case status == http.StatusTooManyRequests || isThrottleCode(code):
		info = retry.Info{Safety: retry.Safe, Throttle: true, Fault: retry.FaultServer}
	case transientCodes[code] || extra[code] || inStatuses(status):
		info = retry.Info{Safety: retry.MaybeSafe, Fault: retry.FaultServer}
	case errors.As(err, &retryable):
		if !retryable.RetryableError() {
			return retry.Info{Safety: retry.Unsafe, Fault: faultOf(status, fault)}
		}
		info = retry.Info{Safety: retry.MaybeSafe, Fault: retry.FaultServer}
	case status >= 500 || fault == smithy.FaultServer:
		// Answered, by a server that would fail again (501, 505).
		return retry.Info{Safety: retry.Unsafe, Fault: retry.FaultServer}
	case status >= 400 || fault == smithy.FaultClient:
		return retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}
	case status != 0:
		return retry.Info{} // an answer, not a failure of a kind we know
	default:
		return connection(err)
	}
	if d, ok := retryAfter(header); ok {
		info.RetryAfter, info.Allowed = d, true
	}
	return info
}

func inStatuses(status int) bool {
	_, ok := retryableStatuses[status]
	return ok
}

func isThrottleCode(code string) bool {
	if code == "" {
		return false
	}
	_, ok := sdkretry.DefaultThrottleErrorCodes[code]
	return ok
}

func faultOf(status int, f smithy.ErrorFault) retry.Fault {
	switch {
	case status >= 500 || f == smithy.FaultServer:
		return retry.FaultServer
	case status >= 400 || f == smithy.FaultClient:
		return retry.FaultClient
	}
	return retry.FaultUnknown
}

// connection classifies a failure that came with no answer.
func connection(err error) retry.Info {
	var ne net.Error
	if !callersContext(err) && errors.As(err, &ne) && ne.Timeout() {
		// An HTTP client's own timeout, which reports itself as a context
		// deadline too: no answer in time, not the caller giving up.
		return retry.Info{Safety: retry.MaybeSafe, Timeout: true, Fault: retry.FaultServer}
	}
	info := retry.Classify(err) // a dial is Safe; a context's error the caller's
	switch {
	case info.Safety == retry.Safe:
		info.Fault = retry.FaultServer
		return info
	case info.Timeout:
		return info
	case info.Safety == retry.Unsafe:
		// The caller's own deadline, with nothing from the service.
		return info
	}
	var conn interface{ ConnectionError() bool }
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return retry.Info{Safety: retry.Safe, Fault: retry.FaultServer}
	case errors.As(err, &conn) && conn.ConnectionError(),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed),
		strings.Contains(err.Error(), "connection reset"):
		return retry.Info{Safety: retry.MaybeSafe, Fault: retry.FaultServer}
	}
	return retry.Info{}
}

// retryAfter reads the service's wait from an answer's headers:
// x-amz-retry-after in milliseconds, else Retry-After in seconds or as an
// HTTP date. A malformed or negative value is no hint.
func retryAfter(h http.Header) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := h.Get("X-Amz-Retry-After"); v != "" {
		if ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && ms >= 0 {
			// A wait too long to represent is still one the strategy's
			// MaxRetryAfter refuses, never a retry sooner than asked.
			return time.Duration(min(ms, int64(maxHint/time.Millisecond))) * time.Millisecond, true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, int64(maxHint/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// maxHint bounds a service's wait as read: longer than any strategy waits.
const maxHint = 100 * 365 * 24 * time.Hour

// classified is an attempt's error with the classification the Retryer
// gave it, so that the strategy, the breaker and a caller's loop read the
// same Info.
type classified struct {
	err  error
	info retry.Info
}

func (e *classified) Error() string         { return e.err.Error() }
func (e *classified) Unwrap() error         { return e.err }
func (e *classified) RetryInfo() retry.Info { return e.info }

// callersContext reports whether err's chain holds a context's error itself,
// as net/http returns when the request's context ends, rather than an error
// that only says it is one (the HTTP client's Timeout).
func callersContext(err error) bool {
	for range 64 {
		switch err {
		case nil:
			return false
		case context.Canceled, context.DeadlineExceeded:
			return true
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				if callersContext(e) {
					return true
				}
			}
			return false
		}
		err = errors.Unwrap(err)
	}
	return false
}
