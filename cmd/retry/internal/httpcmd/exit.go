package httpcmd

import (
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
)

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

// transportExit is the exit status for a call that got no (whole) response
// because of err, after its body began if partial: curl's where it has one,
// so that scripts written for curl read it the same.
func transportExit(err error, partial bool) int {
	var (
		dns     *net.DNSError
		te      interface{ Timeout() bool }
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		record  tls.RecordHeaderError
		alert   tls.AlertError
		corrupt flate.CorruptInputError
	)
	cut := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) && te.Timeout():
		return httpExitTimeout
	case errors.Is(err, errTooManyRedirects):
		return httpExitRedirects
	case errors.As(err, &dns) && hasOp(err, "proxyconnect"):
		return httpExitProxy
	case errors.As(err, &dns):
		return httpExitResolve
	case hasOp(err, "dial"):
		return httpExitConnect
	case errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid):
		return httpExitPeerVerify
	case errors.As(err, &record) || errors.As(err, &alert) || hasOp(err, "remote error"): // crypto/tls's, for the server's alert
		return httpExitTLS
	case errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.As(err, &corrupt) ||
		errors.Is(err, zlib.ErrHeader) || errors.Is(err, zlib.ErrChecksum) || errors.Is(err, errUnknownEncoding):
		return httpExitEncoding // --compressed could not decode the body
	case cut && partial:
		return httpExitPartial
	case cut:
		return httpExitNothing
	}
	return httpExitRecv
}

// hasOp reports whether err's chain holds a *net.OpError for op, under
// others: a proxy's "proxyconnect" wraps the "dial" that failed.
func hasOp(err error, op string) bool {
	var oe *net.OpError
	for errors.As(err, &oe) {
		if oe.Op == op {
			return true
		}
		err = oe.Err
	}
	return false
}
