package httpcmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/httpretry"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

const usage = `usage: retry http [flags] URL

Sends an HTTP request and retries it safely: curl --retry, done right.
Connection failures and the statuses 429, 500, 502, 503 and 504 are retried
with jittered exponential backoff and a retry quota; the server's Retry-After
is obeyed (up to 5 minutes, and never past --timeout). A request that is not
idempotent, such as a POST, is repeated only if it never reached the server,
or if it carries an Idempotency-Key header (--idempotency-key adds one, the
same on every attempt). Flags may come before or after the URL.

Flags (curl's names and meanings; short ones combine, as -fsSL or -XPOST):
  -X, --request M     request method (default GET; POST with data; HEAD, -I)
  -H, --header 'N: v' a request header; repeatable
  -d, --data DATA     the request body, as curl's: @FILE reads a file, @- the
                      standard input, with their line breaks (CR, LF) removed;
                      several data flags are joined with &. Content-Type is
                      application/x-www-form-urlencoded unless -H sets one.
                      The body is sent the same on every attempt
  --data-binary DATA  as -d, but @FILE and @- are sent byte for byte
  --data-raw DATA     as -d, but a leading @ is data, not a file
  --attempts N        attempts in all, the first included (default 3)
  --retry N           retries after the first attempt, as curl's (N+1 attempts)
  --delay D           base wait before the first retry, doubling for each
                      further one (default 100ms); a 429 waits at least 1s
  --max-delay D       longest wait between attempts; 0 = no cap (default 10s)
  -m, --max-time D    limit on each attempt, reading the body included, as
                      curl's on each transfer; an attempt that runs out
                      before its response comes is retried, one that runs
                      out in its body is not, since the body is already
                      being written: exit 28 (default: none). Also
                      --attempt-timeout D
  --timeout D         limit on the whole call: attempts, waits and reading
                      the body (default: none)
  --connect-timeout D limit on each connection's dial, and then on its TLS
                      handshake (default: the system's; 10s)
  --idempotency-key   give a POST or PATCH a random Idempotency-Key so that it
                      can be retried; the server must honour the key
  -L, --location      follow redirects, up to 10: retry always does
  -I, --head          send a HEAD request and print the response's head
  -i, --include       print the status line and headers before the body
  --compressed        ask for a gzip or deflate body and decode it; without
                      it, the body is written as the server sent it
  -o, --output FILE   write the body to FILE instead of standard output;
                      - is standard output
  -f, --fail          a final 4xx or 5xx response writes no body; exit 22
  -A, --user-agent UA the User-Agent header (default retry/VERSION)
  -u, --user U:P      HTTP basic authentication as user U, password P. As in
                      curl, it and -H Authorization, Cookie and
                      Proxy-Authorization go only to the URL's scheme, host
                      and port, not to another that a redirect leads to
  -k, --insecure      accept any server certificate
  --cacert FILE       trust the CA certificates in FILE (PEM) instead of the
                      system's
  -w, --write-out F   print F on stdout at the end, with curl's variables:
                      %{http_code}, %{num_retries}, %{num_redirects},
                      %{size_download}, %{size_upload}, %{speed_download},
                      %{time_total} (seconds, the whole call), %{time_connect}
                      and the other time_ ones (of the final attempt),
                      %{url_effective}, %{url}, %{method}, %{content_type},
                      %{http_version}, %{remote_ip}, %{remote_port},
                      %{exitcode}, %header{NAME}; %{stderr} sends the rest to
                      standard error. An unknown variable is left out, with
                      a warning
  -v, --verbose       a line on stderr per attempt: its status and the wait
  -s, --silent        no line on stderr from retry itself
  -S, --show-error    with -s, still say why the call failed

A URL without a scheme is http://, as in curl.

D is a duration such as 250ms, 1.5s or 2m, or a number of seconds.

The final response's body goes to standard output, whatever its status, and
the reason for a failure to standard error. Redirects are followed; a 3xx
that is not (a 304 Not Modified, a redirect without a Location) is final.

Exit status: 0 for a final 2xx or 3xx response; 1 for any other status;
2 for a usage error; 128+N if signal N stopped it; and as curl:
   5  the proxy's host name did not resolve
   6  the host name did not resolve
   7  no connection could be made, to the server or its proxy
  18  the body was cut short
  22  a final 4xx or 5xx with --fail
  23  -o FILE could not be written
  28  a timeout (--timeout, -m, --connect-timeout); the message names it
  35  the TLS handshake failed
  47  too many redirects (10)
  52  the connection closed before a whole response came
  56  the connection failed otherwise (a reset, a malformed response)
  60  the server's certificate could not be verified (see -k, --cacert)
  61  with --compressed, the body's Content-Encoding could not be decoded

Examples:
  retry http https://example.com/health
  retry http -fsSL --retry 5 -m 10 -o status.json https://example.com/status
  retry http -v --attempts 5 --timeout 30s https://api.example.com/items
  retry http -X PUT -H 'Content-Type: application/json' -d @item.json \
      https://api.example.com/items/42
  retry http --idempotency-key -d @order.json \
      -H 'Content-Type: application/json' https://api.example.com/orders
`

// httpConfig is what "retry http" was asked to do.
type httpConfig struct {
	method     string
	headers    headerList
	data       dataList
	attempts   int
	retries    int           // --retry N: N+1 attempts, as curl counts
	delay      time.Duration // base of the backoff after a failure
	maxDelay   time.Duration // its cap; 0 = none
	attTime    time.Duration // --attempt-timeout or -m; 0 = none
	attLimit   string        // the flag that set attTime, for messages
	head       bool          // -I: a HEAD request, its head printed
	location   bool          // -L: redirects are followed anyway
	compressed bool          // --compressed: ask for a compressed body, and decode it
	timeout    time.Duration
	idemKey    bool
	verbose    bool
	agent      string // -A; "" = retry/VERSION
	user       string // -u USER:PASSWORD; "" = none
	fail       bool   // -f: a final 4xx/5xx prints no body and exits 22
	output     string // -o FILE; "" = stdout
	conn       baseOptions
	writeOut   string // -w FORMAT; "" = none
	silent     bool   // -s: no line on stderr from retry itself
	showErr    bool   // -S: with -s, the line that says why it failed after all
	include    bool   // -i: the status line and headers before the body
	url        string
}

// Run implements "retry http": it parses args and returns the exit status.
func Run(ctx context.Context, args []string, std cli.Stdio) int {
	c, status, ok := parseHTTPFlags(args, std)
	if !ok {
		return status
	}
	req, cleanup, err := c.request(ctx, std.In)
	if err != nil {
		return cli.UsageError(std.Err, "http", err.Error())
	}
	defer cleanup()
	base, err := c.conn.base()
	if err != nil {
		return cli.UsageError(std.Err, "http", err.Error())
	}
	std = c.quieten(std)
	wo := &writeOut{begin: time.Now(), url: c.url, effective: c.url, method: c.method, up: req.ContentLength}
	if c.output != "-" {
		wo.file = c.output
	}
	status = c.call(ctx, std, base, req, wo)
	if c.writeOut != "" {
		wo.exit = status
		c.printWriteOut(std, wo)
	}
	return status
}

// call sends req through the retrying transport over base, writes out the
// answer, records what -w reports in wo, and returns the exit status.
func (c *httpConfig) call(ctx context.Context, std cli.Stdio, base http.RoundTripper, req *http.Request, wo *writeOut) int {
	callCtx := req.Context()
	if c.timeout > 0 {
		// A deadline of the call's own, rather than http.Client's Timeout,
		// so that its cause tells it from the other limits (limitRanOut).
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeoutCause(callCtx, c.timeout, errWholeTimeout)
		defer cancel()
	}
	var (
		report httpretry.Report
		trace  connTrace
	)
	req = req.WithContext(trace.with(httpretry.WithReport(callCtx, &report)))
	client := &http.Client{Transport: c.transport(base, std.Err, req.URL.String(), &wo.retries), CheckRedirect: func(r *http.Request, via []*http.Request) error {
		wo.redirects = len(via)
		keepCredentialsHome(r, via[0])
		return stopRedirects(r, via)
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	wo.conn = trace.times()
	if err != nil {
		return c.failed(ctx, req, std.Err, "no response", err, report)
	}
	defer resp.Body.Close()
	wo.code, wo.header, wo.proto = resp.StatusCode, resp.Header, resp.Proto
	wo.effective, wo.method = resp.Request.URL.String(), resp.Request.Method
	resp.Body = readCloser{countingReader{resp.Body, &wo.down}, resp.Body}
	return c.answer(ctx, std, resp, report)
}

// readCloser is a body read through r and closed with c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

// transport returns the retrying transport, which reports every attempt on
// w with --verbose (first is the URL asked for) and counts its retries in
// retries: those of every hop of a redirect chain, as curl counts a
// transfer's (a Report is the last hop's alone).
func (c *httpConfig) transport(base http.RoundTripper, w io.Writer, first string, retries *int) *httpretry.Transport {
	t := &httpretry.Transport{
		Base: base,
		Strategy: retry.NewStandard(retry.StandardOptions{MaxAttempts: c.attempts,
			Backoff: retry.Exponential{Base: c.delay, Max: c.maxDelay, Jitter: retry.FullJitter}}),
		IdempotencyKey: c.idemKey,
		AttemptTimeout: c.attTime,
	}
	t.OnAttempt = func(a httpretry.Attempt) {
		if a.N > 1 {
			*retries++
		}
		if c.verbose {
			fmt.Fprintln(w, describeAttempt(a, first))
		}
	}
	return t
}
