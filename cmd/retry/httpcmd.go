package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/httpretry"
)

const httpUsage = `usage: retry http [flags] URL

Sends an HTTP request and retries it safely: curl --retry, done right.
Connection failures and the statuses 429, 500, 502, 503 and 504 are retried
with jittered exponential backoff and a retry quota; the server's Retry-After
is obeyed (up to 5 minutes, and never past --timeout). A request that is not
idempotent, such as a POST, is repeated only if it never reached the server,
or if it carries an Idempotency-Key header (--idempotency-key adds one, the
same on every attempt). Flags may come before or after the URL.

Flags:
  -X METHOD           request method (default GET, or POST with -d)
  -H 'Name: value'    a request header; repeatable
  -d DATA             the request body, sent byte for byte on every attempt
                      (like curl --data-binary); @FILE reads a file, @- the
                      standard input. Content-Type is
                      application/x-www-form-urlencoded unless -H sets one
  --attempts N        attempts in all, the first included (default 3)
  --delay D           base wait before the first retry, doubling for each
                      further one (default 100ms); a 429 waits at least 1s
  --max-delay D       longest wait between attempts; 0 = no cap (default 10s)
  --attempt-timeout D limit on each attempt, reading the body included; an
                      attempt that runs out is retried (default: none)
  --timeout D         limit on the whole call: attempts, waits and reading
                      the body (default: none)
  --idempotency-key   give a POST or PATCH a random Idempotency-Key so that it
                      can be retried; the server must honour the key
  -v, --verbose       a line on stderr per attempt: its status and the wait
  -o, --output FILE   write the body to FILE instead of standard output
  -f, --fail          a final 4xx or 5xx response writes no body; exit 22
  -A, --user-agent UA the User-Agent header (default retry/VERSION)
  -u, --user U:P      HTTP basic authentication as user U, password P
  -k, --insecure      accept any server certificate
  --cacert FILE       trust the CA certificates in FILE (PEM) instead of the
                      system's
  --connect-timeout D limit on each connection's dial, and then on its TLS
                      handshake (default: the system's; 10s)
  -w, --write-out F   print F on stdout at the end, with %{http_code},
                      %{num_retries} and %{time_total} (seconds) filled in
  -i, --include       print the status line and headers before the body
  -s, --silent        no line on stderr from retry itself
  -S, --show-error    with -s, still say why the call failed

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
  28  a timeout (--timeout, --attempt-timeout, --connect-timeout)
  35  the TLS handshake failed
  47  too many redirects (10)
  52  the connection closed before a whole response came
  56  the connection failed otherwise (a reset, a malformed response)
  60  the server's certificate could not be verified (see -k, --cacert)
  61  the body's Content-Encoding could not be decoded

Examples:
  retry http https://example.com/health
  retry http -v --attempts 5 --timeout 30s https://api.example.com/items
  retry http -X PUT -H 'Content-Type: application/json' -d @item.json \
      https://api.example.com/items/42
  retry http --idempotency-key -d @order.json \
      -H 'Content-Type: application/json' https://api.example.com/orders
`

// Exit statuses of "retry http", besides 2 for a usage error. Those that
// curl also has take its numbers.
const (
	httpExitFail       = 22 // a final 4xx or 5xx with --fail (curl's)
	httpExitWrite      = 23 // -o FILE could not be written (curl's)
	httpExitOK         = 0  // a final 2xx or 3xx response
	httpExitStatus     = 1  // a final response with another status
	httpExitProxy      = 5  // the proxy's host name did not resolve (curl's)
	httpExitResolve    = 6  // the host name did not resolve (curl's)
	httpExitConnect    = 7  // no connection could be made, to the server or its proxy (curl's)
	httpExitPartial    = 18 // the body was cut short (curl's)
	httpExitTimeout    = 28 // a timeout: --timeout, --attempt-timeout, --connect-timeout (curl's)
	httpExitTLS        = 35 // the TLS handshake failed (curl's)
	httpExitRedirects  = 47 // too many redirects (curl's)
	httpExitNothing    = 52 // the connection closed before a whole response (curl's)
	httpExitRecv       = 56 // the connection failed otherwise, a reset say (curl's)
	httpExitPeerVerify = 60 // the server's certificate could not be verified (curl's)
	httpExitEncoding   = 61 // the body's Content-Encoding could not be decoded (curl's)
)

// httpConfig is what "retry http" was asked to do.
type httpConfig struct {
	method   string
	headers  headerList
	data     dataValue
	attempts int
	delay    time.Duration // base of the backoff after a failure
	maxDelay time.Duration // its cap; 0 = none
	attTime  time.Duration // --attempt-timeout; 0 = none
	timeout  time.Duration
	idemKey  bool
	verbose  bool
	agent    string // -A; "" = retry/VERSION
	user     string // -u USER:PASSWORD; "" = none
	fail     bool   // -f: a final 4xx/5xx prints no body and exits 22
	output   string // -o FILE; "" = stdout
	conn     baseOptions
	writeOut string // -w FORMAT; "" = none
	silent   bool   // -s: no line on stderr from retry itself
	showErr  bool   // -S: with -s, the line that says why it failed after all
	include  bool   // -i: the status line and headers before the body
	url      string
}

// httpCommand implements "retry http".
func httpCommand(ctx context.Context, args []string, std stdio) int {
	c, status, ok := parseHTTPFlags(args, std)
	if !ok {
		return status
	}
	req, cleanup, err := c.request(ctx, std.in)
	if err != nil {
		return usageError(std.err, "http", err.Error())
	}
	defer cleanup()
	std = c.quieten(std)
	var (
		report httpretry.Report
		wo     writeOut
	)
	if c.writeOut != "" {
		defer c.printWriteOut(std.out, &wo, &report, time.Now())
	}
	req = req.WithContext(httpretry.WithReport(req.Context(), &report))
	base, err := c.conn.base()
	if err != nil {
		return usageError(std.err, "http", err.Error())
	}
	client := &http.Client{Transport: c.transport(base, std.err, req.URL.String()), Timeout: c.timeout, CheckRedirect: stopRedirects}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return c.failed(ctx, std.err, "no response", err, report)
	}
	defer resp.Body.Close()
	wo.code = resp.StatusCode
	return c.answer(ctx, std, resp, report)
}

// errTooManyRedirects ends a chain of redirects that goes on too long: a
// loop, most likely.
var errTooManyRedirects = errors.New("too many redirects")

// maxRedirects is how many redirects a request follows, net/http's default.
const maxRedirects = 10

// stopRedirects is the client's CheckRedirect: net/http's default policy,
// with an error the exit status can tell apart.
func stopRedirects(_ *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects: %w", len(via), errTooManyRedirects)
	}
	return nil
}

// transport returns the retrying transport, which reports every attempt on
// w with --verbose; first is the URL asked for.
func (c *httpConfig) transport(base http.RoundTripper, w io.Writer, first string) *httpretry.Transport {
	t := &httpretry.Transport{
		Base: base,
		Strategy: retry.NewStandard(retry.StandardOptions{MaxAttempts: c.attempts,
			Backoff: retry.Exponential{Base: c.delay, Max: c.maxDelay, Jitter: retry.FullJitter}}),
		IdempotencyKey: c.idemKey,
		AttemptTimeout: c.attTime,
	}
	if c.verbose {
		t.OnAttempt = func(a httpretry.Attempt) { fmt.Fprintln(w, describeAttempt(a, first)) }
	}
	return t
}
