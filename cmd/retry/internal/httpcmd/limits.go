package httpcmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
)

// errWholeTimeout is the cause with which --timeout ends the call's
// context, to tell it from the other limits, whose errors are also
// context.DeadlineExceeded or a timeout. net/http returns the cause itself
// for a body cut short by it: it wraps DeadlineExceeded, to be a timeout
// still (transportExit).
var errWholeTimeout = fmt.Errorf("--timeout expired: %w", context.DeadlineExceeded)

// limitRanOut names the time limit that err, the error that ended the call
// whose context is callCtx, comes from, with its value, such as
// "--attempt-timeout 2s ran out"; "" if err is not a timeout. A bare
// "context deadline exceeded" would not say which of four it was.
func (c *httpConfig) limitRanOut(callCtx context.Context, err error) string {
	var (
		te interface{ Timeout() bool }
		oe *net.OpError
	)
	timeout := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) && te.Timeout()
	switch {
	case context.Cause(callCtx) == errWholeTimeout:
		return fmt.Sprintf("--timeout %s expired", c.timeout)
	case !timeout:
		return ""
	case errors.As(err, &oe) && oe.Op == "dial":
		return c.connectLimit("connecting")
	case strings.Contains(err.Error(), "TLS handshake timeout"): // net/http's, which has no type of its own
		return c.connectLimit("in the TLS handshake")
	case c.attTime > 0:
		return fmt.Sprintf("%s %s ran out", c.attLimit, c.attTime)
	}
	return "a time limit ran out: " + err.Error()
}

// connectLimit says that the limit on a connection ran out while doing what.
func (c *httpConfig) connectLimit(what string) string {
	if c.conn.connectTimeout > 0 {
		return fmt.Sprintf("--connect-timeout %s ran out %s", c.conn.connectTimeout, what)
	}
	return "the system's limit on a connection ran out " + what + " (see --connect-timeout)"
}
