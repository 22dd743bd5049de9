package httpretry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"

	"github.com/retrykit/retry"
)

// Kind says how an attempt failed.
type Kind uint8

const (
	// KindConnect: no connection was established (refused, unreachable, a
	// failed DNS lookup, a dial timeout), so the request never reached the
	// server. Such a failure may be retried whatever the method.
	KindConnect Kind = iota + 1
	// KindRead: the request may have reached the server, but no response
	// came back (a reset, EOF before a response, a timeout).
	KindRead
	// KindStatus: the server answered with a status that is a retryable
	// failure (by default 429, 500, 502, 503 and 504).
	KindStatus
)

// String returns "connect", "read" or "status".
func (k Kind) String() string {
	switch k {
	case KindConnect:
		return "connect"
	case KindRead:
		return "read"
	case KindStatus:
		return "status"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// StatusError is a response whose status is a retryable failure, as the
// strategy sees it: it carries the status and headers, and classifies itself
// (RetryInfo) from the status, the method and the server's wait.
type StatusError struct {
	StatusCode int
	Status     string // e.g. "503 Service Unavailable"
	Header     http.Header
	info       retry.Info
}

// Error reads "httpretry: server answered 503 Service Unavailable".
func (e *StatusError) Error() string { return "httpretry: server answered " + e.Status }

// RetryInfo reports the classification the Transport gave the response.
func (e *StatusError) RetryInfo() retry.Info { return e.info }

// transportError is a transport failure with its classification.
type transportError struct {
	err  error
	info retry.Info
}

func (e *transportError) Error() string         { return e.err.Error() }
func (e *transportError) Unwrap() error         { return e.err }
func (e *transportError) RetryInfo() retry.Info { return e.info }

// transportKind sorts a transport error. known is false for errors that are
// not network failures (a malformed request, a bad certificate, an unknown
// host): those are never retried.
func transportKind(err error) (kind Kind, timeout, known bool) {
	var (
		oe    *net.OpError
		dns   *net.DNSError
		cert  *tls.CertificateVerificationError
		rec   tls.RecordHeaderError
		alert tls.AlertError
		ua    x509.UnknownAuthorityError
		he    x509.HostnameError
		ci    x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &cert), errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci),
		errors.As(err, &rec), errors.As(err, &alert):
		return 0, false, false // the handshake failed for good: retrying cannot fix it
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return 0, false, false
		}
		return KindConnect, dns.IsTimeout, true
	case errors.As(err, &oe) && (oe.Op == "dial" || oe.Op == "proxyconnect"):
		return KindConnect, oe.Timeout(), true
	case errors.As(err, &oe) && (oe.Op == "remote error" || oe.Op == "local error"):
		return 0, false, false // a TLS alert over TCP: the handshake failed for good
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return KindRead, true, true
	case errors.As(err, &oe),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return KindRead, false, true
	}
	return 0, false, false
}
