package httpcmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/httpretry"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// quieten applies -s, with which retry writes nothing on stderr, and -sS,
// with which it writes only why the request failed.
func (c *httpConfig) quieten(std cli.Stdio) cli.Stdio {
	if c.silent {
		if c.showErr {
			c.verbose = false // -sS: errors only
		} else {
			std.Err = io.Discard
		}
	}
	return std
}

// answer writes out the final response, but not an error's body with -f,
// and returns the exit status.
func (c *httpConfig) answer(ctx context.Context, std cli.Stdio, resp *http.Response, report httpretry.Report) int {
	failed := resp.StatusCode >= 400
	if !(failed && c.fail) {
		if status, ok := c.writeBody(ctx, std, resp, report); !ok {
			return status
		}
	}
	if !failed {
		return httpExitOK
	}
	fmt.Fprintf(std.Err, "retry: server answered %s after %s (%s)\n",
		resp.Status, cli.Plural(report.Attempts, "attempt"), c.whyStopped(resp, report.Reason))
	if c.fail {
		return httpExitFail
	}
	return httpExitStatus
}

// writeBody copies the final response's body to stdout, or to the file -o
// names, created only now that there is a body for it. ok is false, with
// the exit status, if that failed.
func (c *httpConfig) writeBody(ctx context.Context, std cli.Stdio, resp *http.Response, report httpretry.Report) (status int, ok bool) {
	w := std.Out
	if c.output != "" && c.output != "-" { // -o - is stdout, as in curl
		f, err := os.Create(c.output)
		if err != nil {
			fmt.Fprintf(std.Err, "retry: cannot write the body: %v\n", err)
			return httpExitWrite, false
		}
		defer f.Close()
		w = f
	}
	if c.include || c.head {
		fmt.Fprintf(w, "%s %s\r\n", resp.Proto, resp.Status)
		resp.Header.Write(w)
		io.WriteString(w, "\r\n")
	}
	if c.head {
		return 0, true // -I: the head alone, whatever the method
	}
	body := io.Reader(resp.Body)
	if c.compressed {
		var err error
		if body, err = decodeBody(resp); err != nil {
			return c.failed(ctx, resp.Request, std.Err, "response body not decoded", err, report), false
		}
	}
	if _, err := io.Copy(w, body); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			fmt.Fprintf(std.Err, "retry: cannot write the body: %v\n", err)
			return httpExitWrite, false
		}
		what := "response body incomplete"
		var de *decodeError
		if errors.As(err, &de) {
			what = "response body not decoded"
		}
		return c.failed(ctx, resp.Request, std.Err, what, err, report), false
	}
	return 0, true
}

// describeAttempt is the --verbose line for one attempt, such as
// "retry: attempt 1: 503 Service Unavailable, retrying in 1.2s". The URL is
// named when a redirect led away from first.
func describeAttempt(a httpretry.Attempt, first string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "retry: attempt %d: ", a.N)
	if u := a.Request.URL.String(); u != first {
		fmt.Fprintf(&b, "%s %s: ", a.Request.Method, u)
	}
	if a.Response != nil {
		b.WriteString(a.Response.Status)
	} else {
		fmt.Fprint(&b, a.Err)
	}
	if a.Retry {
		fmt.Fprintf(&b, ", retrying in %s", cli.RoundDelay(a.Delay))
	}
	return b.String()
}

// failed reports a call that ended without a response (what is "no
// response") or whose body could not be read, and returns the exit status.
// req is the request made, whose context is the call's; ctx is the
// signals'.
func (c *httpConfig) failed(ctx context.Context, req *http.Request, w io.Writer, what string, err error, report httpretry.Report) int {
	callCtx := req.Context()
	if sig, ok := cli.InterruptedBy(ctx); ok {
		fmt.Fprintf(w, "retry: stopped by %s\n", cli.SignalName(sig))
		return 128 + int(sig)
	}
	var (
		ue *url.Error
		re *retry.Error
	)
	if errors.As(err, &ue) {
		err = ue.Err // the method and URL are known to the caller
	}
	attempts := cli.Plural(report.Attempts, "attempt")
	status := transportExit(err, what != "no response")
	limit := c.limitRanOut(callCtx, err)
	switch {
	case context.Cause(callCtx) == errWholeTimeout:
		fmt.Fprintf(w, "retry: %s: %s (%s made)\n", what, limit, attempts)
	case errors.As(err, &re) && re.Err != nil:
		fmt.Fprintf(w, "retry: %s after %s (%s): %s\n", what, attempts, c.whyNoResponse(req, re), cmp.Or(limit, re.Err.Error()))
	default:
		fmt.Fprintf(w, "retry: %s after %s: %s\n", what, attempts, cmp.Or(limit, err.Error()))
	}
	return status
}

// whyStopped explains why a final error response was not retried, or not
// retried more.
func (c *httpConfig) whyStopped(resp *http.Response, reason error) string {
	switch {
	case reason == nil && resp.StatusCode < 500:
		return "a 4xx status other than 429 is not retried: the request itself needs fixing"
	case reason == nil:
		return "only 500, 502, 503 and 504 are retried"
	case errors.Is(reason, retry.ErrNotRetryable) && !c.idempotent(resp.Request):
		return fmt.Sprintf("a %s that reached the server is not repeated without an Idempotency-Key; "+
			"add --idempotency-key if the server honours one", resp.Request.Method)
	case errors.Is(reason, retry.ErrDeadline) && c.timeout > 0:
		why := trimReason(reason) + ", --timeout " + c.timeout.String()
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			why = "the server asked to wait (Retry-After: " + ra + "), but the " + why
		}
		return why
	}
	return trimReason(reason)
}

// whyNoResponse explains why a call that got no response stopped: as a
// final error response, a request that may have reached the server is not
// repeated without an Idempotency-Key, which the message suggests.
func (c *httpConfig) whyNoResponse(req *http.Request, e *retry.Error) string {
	if errors.Is(e.Reason, retry.ErrNotRetryable) && !c.idempotent(req) {
		// Would the failure have been retried, were req idempotent?
		if info, _ := (&httpretry.Transport{}).Classify(nil, e.Err, true); info.Retryable() {
			return fmt.Sprintf("a %s that may have reached the server is not repeated without an Idempotency-Key; "+
				"add --idempotency-key if the server honours one", req.Method)
		}
	}
	return trimReason(e.Reason)
}

// idempotent reports whether req may be repeated as the Transport sees it:
// by its method or its Idempotency-Key.
func (c *httpConfig) idempotent(req *http.Request) bool {
	methods := []string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete}
	return slices.Contains(methods, req.Method) || req.Header.Get(httpretry.IdempotencyKeyHeader) != ""
}

// trimReason is a reason retrying stopped, without its package prefix.
func trimReason(err error) string {
	s := err.Error()
	for _, prefix := range []string{"retry: ", "httpretry: "} {
		s = strings.TrimPrefix(s, prefix)
	}
	return s
}
