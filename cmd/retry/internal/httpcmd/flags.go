package httpcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// parseHTTPFlags reads the flags, before and after the URL. It returns ok
// false with the exit status when there is nothing to send: 0 after -h, 2
// after a usage error.
func parseHTTPFlags(args []string, std cli.Stdio) (httpConfig, int, bool) {
	c := httpConfig{attempts: 3, delay: 100 * time.Millisecond, maxDelay: 10 * time.Second}
	fs := c.flagSet()
	urls, err := parseInterspersed(fs, splitShortFlags(fs, args))
	if status, done := cli.ParseDone(std, "http", usage, err); done {
		return c, status, false
	}
	if len(urls) == 1 {
		c.url = withScheme(urls[0])
	}
	given := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if msg := c.settle(given); msg != "" {
		return c, cli.UsageError(std.Err, "http", msg), false
	}
	if msg := c.check(len(urls)); msg != "" {
		return c, cli.UsageError(std.Err, "http", msg), false
	}
	return c, 0, true
}

// flagSet returns the flags of "retry http", which set c's fields.
func (c *httpConfig) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("retry http", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // -h prints the usage to stdout, errors a hint
	cli.StringFlag(fs, &c.method, "X", "request")
	for _, name := range []string{"H", "header"} {
		fs.Var(&c.headers, name, "")
	}
	for _, name := range []string{"d", "data"} {
		fs.Var(dataFlag{&c.data, dataText}, name, "")
	}
	fs.Var(dataFlag{&c.data, dataBinary}, "data-binary", "")
	fs.Var(dataFlag{&c.data, dataRaw}, "data-raw", "")
	fs.IntVar(&c.attempts, "attempts", c.attempts, "")
	fs.IntVar(&c.retries, "retry", 0, "")
	fs.Var(cli.DurationValue(&c.timeout), "timeout", "")
	fs.Var(cli.DurationValue(&c.delay), "delay", "")
	fs.Var(cli.DurationValue(&c.maxDelay), "max-delay", "")
	fs.Var(cli.DurationValue(&c.attTime), "attempt-timeout", "")
	for _, name := range []string{"m", "max-time"} {
		fs.Var(cli.DurationValue(&c.attTime), name, "")
	}
	cli.BoolFlag(fs, &c.head, "I", "head")
	cli.BoolFlag(fs, &c.location, "L", "location")
	fs.BoolVar(&c.compressed, "compressed", false, "")
	fs.BoolVar(&c.idemKey, "idempotency-key", false, "")
	cli.BoolFlag(fs, &c.verbose, "v", "verbose")
	cli.StringFlag(fs, &c.output, "o", "output")
	cli.BoolFlag(fs, &c.fail, "f", "fail")
	cli.StringFlag(fs, &c.agent, "A", "user-agent")
	cli.StringFlag(fs, &c.user, "u", "user")
	cli.StringFlag(fs, &c.writeOut, "w", "write-out")
	cli.BoolFlag(fs, &c.include, "i", "include")
	cli.BoolFlag(fs, &c.silent, "s", "silent")
	cli.BoolFlag(fs, &c.showErr, "S", "show-error")
	cli.BoolFlag(fs, &c.conn.insecure, "k", "insecure")
	fs.StringVar(&c.conn.caFile, "cacert", "", "")
	fs.Var(cli.DurationValue(&c.conn.connectTimeout), "connect-timeout", "")
	return fs
}

// parseInterspersed parses args with fs, letting flags and positional
// arguments mix, and returns the positional ones. Everything after "--" is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := cli.Parse(fs, args); err != nil {
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

// settle works out what the flags given, named in given, mean together:
// the method, the attempts, the name of the per-attempt limit. It returns
// what is wrong with them, or "".
func (c *httpConfig) settle(given map[string]bool) string {
	switch {
	case given["retry"] && given["attempts"]:
		return "--retry N and --attempts N+1 say the same: give one"
	case (given["m"] || given["max-time"]) && given["attempt-timeout"]:
		return "-m/--max-time and --attempt-timeout say the same: give one"
	case c.head && len(c.data) > 0:
		return "-I sends a HEAD request, which has no body: drop -I or the data" // as curl refuses it
	case given["retry"] && c.retries < 0:
		return "--retry must not be negative"
	}
	if given["retry"] {
		c.attempts = c.retries + 1 // curl's --retry counts the attempts after the first
	}
	c.attLimit = "--attempt-timeout"
	if given["m"] || given["max-time"] {
		c.attLimit = "--max-time"
	}
	if c.method == "" {
		switch {
		case c.head:
			c.method = http.MethodHead
		case len(c.data) > 0:
			c.method = http.MethodPost
		default:
			c.method = http.MethodGet
		}
	}
	return ""
}

// withScheme is url with http:// before it if it has no scheme, as curl
// reads it: "localhost:8080/x" is http://localhost:8080/x.
func withScheme(url string) string {
	if strings.Contains(url, "://") {
		return url
	}
	return "http://" + url
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
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("URL %q: only http and https are supported", c.url)
	case u.Host == "":
		return fmt.Sprintf("URL %q has no host", c.url)
	case !validPort(u.Port()):
		return fmt.Sprintf("URL %q: the port must be a number from 1 to 65535", c.url)
	}
	return ""
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

// validPort reports whether p, the port of a URL, is absent or from 1 to
// 65535: a dial would refuse any other only after the request was built.
func validPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}
