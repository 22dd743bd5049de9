package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
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
  --connect-timeout D limit on each connection's dial (default: the system's)
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
2 for a usage error; as curl: 6 if the host name did not resolve, 7 if no
connection could be made, 28 for a timeout (--timeout, --attempt-timeout,
--connect-timeout), 22 for a final 4xx or 5xx with --fail, 23 if -o cannot
be written; 3 if no whole response came for another reason (a TLS failure,
a connection cut); 128+N if signal N stopped it.

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
	httpExitNoResponse = 3  // no response or an incomplete body, for a reason none below names
	httpExitResolve    = 6  // the host name did not resolve (curl's)
	httpExitConnect    = 7  // no connection could be made (curl's)
	httpExitTimeout    = 28 // a timeout: --timeout, --attempt-timeout, --connect-timeout (curl's)
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
	if c.silent {
		if c.showErr {
			c.verbose = false // -sS: errors only
		} else {
			std.err = io.Discard
		}
	}

	var report httpretry.Report
	var wo writeOut
	if c.writeOut != "" {
		begin := time.Now()
		defer func() {
			wo.retries, wo.total = max(report.Attempts-1, 0), time.Since(begin)
			fmt.Fprint(std.out, wo.expand(c.writeOut))
		}()
	}
	req = req.WithContext(httpretry.WithReport(req.Context(), &report))
	base, err := c.conn.base()
	if err != nil {
		return usageError(std.err, "http", err.Error())
	}
	client := &http.Client{Transport: c.transport(base, std.err, req.URL.String()), Timeout: c.timeout}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return c.failed(ctx, std.err, "no response", err, report)
	}
	defer resp.Body.Close()
	wo.code = resp.StatusCode
	failed := resp.StatusCode >= 400
	if !(failed && c.fail) {
		if status, ok := c.writeBody(ctx, std, resp, report); !ok {
			return status
		}
	}
	if failed {
		fmt.Fprintf(std.err, "retry: server answered %s after %s (%s)\n",
			resp.Status, plural(report.Attempts, "attempt"), c.whyStopped(resp, report.Reason))
		if c.fail {
			return httpExitFail
		}
		return httpExitStatus
	}
	return httpExitOK
}

// writeBody copies the final response's body to stdout, or to the file -o
// names, created only now that there is a body for it. ok is false, with
// the exit status, if that failed.
func (c *httpConfig) writeBody(ctx context.Context, std stdio, resp *http.Response, report httpretry.Report) (status int, ok bool) {
	w := std.out
	if c.output != "" {
		f, err := os.Create(c.output)
		if err != nil {
			fmt.Fprintf(std.err, "retry: cannot write the body: %v\n", err)
			return httpExitWrite, false
		}
		defer f.Close()
		w = f
	}
	if c.include {
		fmt.Fprintf(w, "%s %s\r\n", resp.Proto, resp.Status)
		resp.Header.Write(w)
		io.WriteString(w, "\r\n")
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			fmt.Fprintf(std.err, "retry: cannot write the body: %v\n", err)
			return httpExitWrite, false
		}
		return c.failed(ctx, std.err, "response body incomplete", err, report), false
	}
	return 0, true
}

// parseHTTPFlags reads the flags, before and after the URL. It returns ok
// false with the exit status when there is nothing to send: 0 after -h, 2
// after a usage error.
func parseHTTPFlags(args []string, std stdio) (httpConfig, int, bool) {
	c := httpConfig{attempts: 3, delay: 100 * time.Millisecond, maxDelay: 10 * time.Second}
	fs := flag.NewFlagSet("retry http", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // -h prints the usage to stdout, errors a hint
	fs.StringVar(&c.method, "X", "", "")
	fs.Var(&c.headers, "H", "")
	fs.Var(&c.data, "d", "")
	fs.IntVar(&c.attempts, "attempts", c.attempts, "")
	fs.Var(durationValue{&c.timeout}, "timeout", "")
	fs.Var(durationValue{&c.delay}, "delay", "")
	fs.Var(durationValue{&c.maxDelay}, "max-delay", "")
	fs.Var(durationValue{&c.attTime}, "attempt-timeout", "")
	fs.BoolVar(&c.idemKey, "idempotency-key", false, "")
	for _, name := range []string{"v", "verbose"} {
		fs.BoolVar(&c.verbose, name, false, "")
	}
	for _, name := range []string{"o", "output"} {
		fs.StringVar(&c.output, name, "", "")
	}
	for _, name := range []string{"f", "fail"} {
		fs.BoolVar(&c.fail, name, false, "")
	}
	for _, name := range []string{"A", "user-agent"} {
		fs.StringVar(&c.agent, name, "", "")
	}
	for _, name := range []string{"u", "user"} {
		fs.StringVar(&c.user, name, "", "")
	}
	for _, name := range []string{"w", "write-out"} {
		fs.StringVar(&c.writeOut, name, "", "")
	}
	for _, name := range []string{"i", "include"} {
		fs.BoolVar(&c.include, name, false, "")
	}
	for _, name := range []string{"s", "silent"} {
		fs.BoolVar(&c.silent, name, false, "")
	}
	for _, name := range []string{"S", "show-error"} {
		fs.BoolVar(&c.showErr, name, false, "")
	}
	for _, name := range []string{"k", "insecure"} {
		fs.BoolVar(&c.conn.insecure, name, false, "")
	}
	fs.StringVar(&c.conn.caFile, "cacert", "", "")
	fs.Var(durationValue{&c.conn.connectTimeout}, "connect-timeout", "")
	urls, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(std.out, httpUsage)
			return c, 0, false
		}
		return c, usageError(std.err, "http", err.Error()), false
	}
	if len(urls) == 1 {
		c.url = urls[0]
	}
	if c.method == "" {
		c.method = http.MethodGet
		if c.data.set {
			c.method = http.MethodPost
		}
	}
	if msg := c.check(len(urls)); msg != "" {
		return c, usageError(std.err, "http", msg), false
	}
	return c, 0, true
}

// parseInterspersed parses args with fs, letting flags and positional
// arguments mix, and returns the positional ones. Everything after "--" is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// check returns what is wrong with c, given the number of URLs, or "".
func (c *httpConfig) check(urls int) string {
	switch {
	case urls == 0:
		return "no URL: retry http [flags] URL"
	case urls > 1:
		return "one URL at a time, please; quote a URL that contains & or ?"
	case c.attempts < 1:
		return "--attempts must be at least 1"
	case c.timeout < 0:
		return "--timeout must not be negative (0 means no limit)"
	case c.user != "" && !strings.Contains(c.user, ":"):
		return "-u wants USER:PASSWORD (retry does not prompt for a password)"
	case c.delay < 0:
		return "--delay must not be negative"
	case c.maxDelay < 0:
		return "--max-delay must not be negative (0 means no cap)"
	case c.conn.connectTimeout < 0:
		return "--connect-timeout must not be negative (0 means the system's)"
	case c.attTime < 0:
		return "--attempt-timeout must not be negative (0 means no limit)"
	}
	u, err := url.Parse(c.url)
	switch {
	case err != nil:
		return fmt.Sprintf("bad URL %q: %v", c.url, errors.Unwrap(err))
	case u.Scheme == "" || u.Host == "" && u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("URL %q has no scheme: did you mean http://%s or https://%s?", c.url, c.url, c.url)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("URL %q: only http and https are supported", c.url)
	case u.Host == "":
		return fmt.Sprintf("URL %q has no host", c.url)
	case !validPort(u.Port()):
		return fmt.Sprintf("URL %q: the port must be a number from 1 to 65535", c.url)
	}
	return ""
}

// request builds the request; cleanup closes the file -d @FILE opened.
func (c *httpConfig) request(ctx context.Context, stdin io.Reader) (*http.Request, func(), error) {
	req, err := http.NewRequestWithContext(ctx, c.method, c.url, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot make a %s request to %q: %v", c.method, c.url, err)
	}
	cleanup := func() {}
	if user, pass, ok := strings.Cut(c.user, ":"); ok {
		req.SetBasicAuth(user, pass)
	}
	for _, h := range c.headers {
		if http.CanonicalHeaderKey(h.name) == "Host" {
			req.Host = h.value
		} else {
			req.Header.Add(h.name, h.value)
		}
	}
	// Servers log and route by it; a -H User-Agent wins, as in curl.
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", cmp.Or(c.agent, "retry/"+version()))
	}
	if c.data.set {
		b, err := c.data.open(stdin)
		if err != nil {
			return nil, nil, err
		}
		cleanup = b.close
		req.ContentLength = b.size
		req.GetBody = b.get
		req.Body, _ = b.get()
		if _, ok := req.Header["Content-Type"]; !ok {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl does
		}
	}
	return req, cleanup, nil
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
		fmt.Fprintf(&b, ", retrying in %s", roundDelay(a.Delay))
	}
	return b.String()
}

// failed reports a call that ended without a response (what is "no
// response") or whose body could not be read, and returns the exit status.
func (c *httpConfig) failed(ctx context.Context, w io.Writer, what string, err error, report httpretry.Report) int {
	if sig, ok := interruptedBy(ctx); ok {
		fmt.Fprintf(w, "retry: stopped by %s\n", signalName(sig))
		return 128 + int(sig)
	}
	var (
		ue *url.Error
		re *retry.Error
	)
	if errors.As(err, &ue) {
		err = ue.Err // the method and URL are known to the caller
	}
	attempts := plural(report.Attempts, "attempt")
	status := transportExit(err)
	switch {
	case c.timeout > 0 && (errors.Is(err, context.DeadlineExceeded) || ue != nil && ue.Timeout()):
		fmt.Fprintf(w, "retry: %s: --timeout %s expired (%s made)\n", what, c.timeout, attempts)
	case errors.As(err, &re) && re.Err != nil:
		fmt.Fprintf(w, "retry: %s after %s (%s): %v\n", what, attempts, trimReason(re.Reason), re.Err)
	default:
		fmt.Fprintf(w, "retry: %s after %s: %v\n", what, attempts, err)
	}
	return status
}

// transportExit is the exit status for a call that got no (whole) response
// because of err: curl's where it has one, so that scripts written for curl
// read it the same.
func transportExit(err error) int {
	var (
		dns *net.DNSError
		op  *net.OpError
		te  interface{ Timeout() bool }
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) && te.Timeout():
		return httpExitTimeout
	case errors.As(err, &dns):
		return httpExitResolve
	case errors.As(err, &op) && op.Op == "dial":
		return httpExitConnect
	}
	return httpExitNoResponse
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

// header is one -H flag.
type header struct{ name, value string }

// headerList is the -H flags, in order.
type headerList []header

func (l *headerList) String() string { return "" }

// Set adds a header given as "Name: value".
func (l *headerList) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || !isToken(name) {
		return fmt.Errorf("want a header as 'Name: value', not %q", v)
	}
	value = strings.TrimSpace(value)
	// net/http refuses these only when the request is sent, as an error
	// that reads like a failed attempt: say so while reading the flags.
	if strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return fmt.Errorf("header %s: a value may not hold control characters such as a line break", name)
	}
	*l = append(*l, header{name, value})
	return nil
}

// isToken reports whether s is an RFC 9110 token, as a header name must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// dataValue is the -d flag.
type dataValue struct {
	arg string
	set bool
}

func (d *dataValue) String() string { return d.arg }

func (d *dataValue) Set(v string) error {
	if d.set {
		return errors.New("give the body once; for a long one use -d @FILE")
	}
	d.arg, d.set = v, true
	return nil
}

// requestBody is a request body that every attempt can send again.
type requestBody struct {
	get   func() (io.ReadCloser, error)
	size  int64
	close func()
}

// open returns the body -d asks for: the data itself, a file read afresh
// for each attempt (@FILE), or the standard input, read once and held
// (@-).
func (d *dataValue) open(stdin io.Reader) (requestBody, error) {
	name, isFile := strings.CutPrefix(d.arg, "@")
	switch {
	case !isFile:
		return bytesBody([]byte(d.arg)), nil
	case name == "-":
		data, err := io.ReadAll(stdin)
		if err != nil {
			return requestBody{}, fmt.Errorf("-d @-: reading the standard input: %v", err)
		}
		return bytesBody(data), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return requestBody{}, fmt.Errorf("-d @%s: %v", name, errors.Unwrap(err))
	}
	info, err := f.Stat()
	if err == nil && info.Mode().IsRegular() && info.Size() > 0 {
		size := info.Size()
		return requestBody{
			get:   func() (io.ReadCloser, error) { return io.NopCloser(io.NewSectionReader(f, 0, size)), nil },
			size:  size,
			close: func() { f.Close() },
		}, nil
	}
	// Not a plain file (a pipe, a device), or empty: read it once and hold it.
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return requestBody{}, fmt.Errorf("-d @%s: %v", name, err)
	}
	return bytesBody(data), nil
}

// bytesBody is a body held in memory.
func bytesBody(data []byte) requestBody {
	get := func() (io.ReadCloser, error) {
		if len(data) == 0 {
			return http.NoBody, nil
		}
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	return requestBody{get: get, size: int64(len(data)), close: func() {}}
}

// validPort reports whether p, the port of a URL, is absent or from 1 to
// 65535: a dial would refuse any other only after the request was built.
func validPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}
