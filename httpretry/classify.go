package httpretry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"syscall"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/errchain"
)

// Kind says how an attempt failed.
type Kind uint8

const (
	// KindConnect: the request never reached the server, or the server
	// refused it unprocessed: no connection was established (refused,
	// unreachable, a failed DNS lookup, a dial timeout), the server closed
	// the connection before reading it, or an HTTP/2 server refused its
	// stream (REFUSED_STREAM, or a GOAWAY whose last stream id is below
	// it). Such a failure may be retried whatever the method.
	KindConnect Kind = iota + 1
	// KindRead: the request may have reached the server, but no response
	// came back whole (a reset, EOF before a response, a timeout, an
	// HTTP/2 stream reset or abandoned after the server took it, an HTTP/2
	// connection lost to a failed health check, a malformed response, a
	// TLS record that fails its integrity check).
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
// (RetryInfo) from the status, the method and the server's wait, and is
// retry.Info.Allowed when that wait is a Retry-After the Transport obeys.
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
// not network failures (a malformed request, a bad certificate, a failed TLS
// handshake, an unknown host): those are never retried, and so is any error
// this function does not recognise.
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
		se    h2StreamError
		pe    textproto.ProtocolError
	)
	switch {
	case errors.As(err, &cert), errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci),
		errors.As(err, &alert):
		return 0, false, false // the handshake failed for good: retrying cannot fix it
	case errors.As(err, &rec):
		// Conn is set only when the first record is not TLS at all: the
		// server does not speak it. Otherwise a record's header was
		// invalid, a damaged record like those of tlsRecordFailure.
		if rec.Conn != nil {
			return 0, false, false
		}
		return KindRead, false, true
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return 0, false, false
		}
		return KindConnect, dns.IsTimeout, true
	case errors.As(err, &oe) && (oe.Op == "dial" || oe.Op == "proxyconnect"):
		return KindConnect, oe.Timeout(), true
	case errors.As(err, &oe) && (oe.Op == "remote error" || oe.Op == "local error"):
		if tlsRecordFailure(oe) {
			return KindRead, false, true
		}
		return 0, false, false // a TLS alert over TCP: the handshake failed for good
	case errors.As(err, &se):
		return h2StreamKind(se.Code)
	case errors.As(err, &pe):
		return KindRead, false, true // a response header block Go cannot parse
	}
	if kind, ok := textKind(err); ok {
		if kind == 0 {
			return 0, false, false
		}
		return kind, false, true
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

// tlsRecordFailure reports whether a TLS alert error is the record layer's:
// a record that failed its integrity check or exceeded the size limit (RFC
// 8446, section 5.2), detected here ("local error"). The connection's bytes
// were damaged on the way, as by a reset, so the response was lost, not
// refused. crypto/tls reports the alert in an unexported type; its text is
// the alert's name, which is what is matched. Go's error does not say whether
// the handshake had completed, so a record damaged among the handshake's own
// encrypted messages counts too; the handshake's failures to agree
// (certificates, versions, ciphers, a peer that does not speak TLS, any alert
// the server sends) are other errors, and stay permanent.
func tlsRecordFailure(oe *net.OpError) bool {
	if oe.Op != "local error" || oe.Err == nil {
		return false
	}
	switch oe.Err.Error() {
	case "tls: bad record MAC", "tls: record overflow":
		return true
	}
	return false
}

// h2StreamError has the fields of the HTTP/2 stream error that net/http's
// bundled HTTP/2 client returns when a stream is reset (RST_STREAM, RFC 9113
// section 6.4). That type is unexported, but its As method copies it into any
// struct with these field names and convertible types (it exists so that
// golang.org/x/net/http2.StreamError can catch it), which is how errors.As
// reaches it without matching text.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

// Error makes h2StreamError a target for errors.As; it is never returned.
func (e h2StreamError) Error() string { return "http2 stream error" }

// HTTP/2 error codes (RFC 9113, section 7) that decide a reset's kind.
const (
	h2RefusedStream      = 0x7
	h2InadequateSecurity = 0xc
	h2HTTP11Required     = 0xd
)

// Fixed messages of net/http (and golang.org/x/net/http2) that textKind
// recognises, whole or by their start.
const (
	msgServerClosedIdle   = "http: server closed idle connection"
	msgMalformed          = "malformed HTTP "
	msgStreamError        = "stream error: stream ID "
	msgCannotRetry        = "http2: Transport: cannot retry err ["
	msgCannotRetryEnd     = "] after Request.Body was written"
	msgGoAwayAbove        = "http2: Transport received GOAWAY from server ErrCode:"
	msgGracefulGoAway     = "http2: Transport received Server's graceful shutdown GOAWAY"
	msgGoAwayClosed       = "http2: server sent GOAWAY and closed the connection;"
	msgConnLost           = "http2: client connection lost"
	nameRefusedStream     = "REFUSED_STREAM"
	nameInadequateSecured = "INADEQUATE_SECURITY"
	nameHTTP11Required    = "HTTP_1_1_REQUIRED"
)

// h2StreamKind sorts a reset stream by its error code. REFUSED_STREAM
// guarantees that the server did no processing of the request (RFC 9113,
// section 8.7), so it may be sent again whatever its method. A server that
// requires HTTP/1.1 or a stronger TLS setup will answer the same way every
// time. Any other code may come after the server acted on the request.
func h2StreamKind(code uint32) (Kind, bool, bool) {
	switch code {
	case h2RefusedStream:
		return KindConnect, false, true
	case h2InadequateSecurity, h2HTTP11Required:
		return 0, false, false
	}
	return KindRead, false, true
}

// textKind recognises the failures that net/http reports in errors with no
// type to match, by their text: kind is 0 with ok true for one that retrying
// cannot fix, and ok is false for an error it does not know. Each text is a
// fixed message of net/http (or golang.org/x/net/http2, whose messages are
// the same); only a whole message, or its fixed start, is matched, on each
// error of the chain, so a message that merely quotes one is not taken for
// it.
//
//   - "http: server closed idle connection": the server closed a connection
//     before a request was expected on it (net/http sets it only then), so
//     the request was never read: a connect failure.
//   - "malformed HTTP response", "malformed HTTP status code", "malformed
//     HTTP version": a status line that cannot be parsed, the read failure of
//     a response (urllib3 retries it as a read error).
//   - HTTP/2: a GOAWAY whose last stream id is below the request's stream
//     ("received GOAWAY from server ErrCode:", "graceful shutdown GOAWAY")
//     means the server never processed it (RFC 9113, section 6.8): a connect
//     failure. A connection closed after a GOAWAY that covered the stream
//     ("server sent GOAWAY and closed the connection") may have processed
//     it: a read failure. A reset stream's text ("stream error: stream ID N;
//     CODE"), alone or inside the client's "cannot retry err [...]", is
//     sorted as h2StreamKind sorts its code.
//   - "http2: client connection lost": the connection failed the client's
//     health check (HTTP2Config.SendPingTimeout and PingTimeout: a PING went
//     unanswered) and was closed under the request, which the server may
//     have processed: a read failure. net/http makes it with errors.New at
//     each use, so no value or type of it can be matched; its text is the
//     same in golang.org/x/net/http2, whose client the bundled one is.
func textKind(err error) (kind Kind, ok bool) {
	var w errchain.Walk // a hostile tree cannot make this slow
	w.Find(err, func(e error) bool {
		kind, ok = messageKind(e.Error())
		return ok
	})
	return kind, ok
}

// messageKind sorts one error message; see textKind.
func messageKind(msg string) (Kind, bool) {
	switch {
	case msg == msgServerClosedIdle:
		return KindConnect, true
	case strings.HasPrefix(msg, msgMalformed+"response "),
		strings.HasPrefix(msg, msgMalformed+"status code "),
		strings.HasPrefix(msg, msgMalformed+"version "):
		return KindRead, true
	case msg == msgGracefulGoAway, strings.HasPrefix(msg, msgGoAwayAbove):
		return KindConnect, true
	case strings.HasPrefix(msg, msgGoAwayClosed), msg == msgConnLost:
		return KindRead, true
	case strings.HasPrefix(msg, msgCannotRetry):
		inner, _, found := strings.Cut(msg[len(msgCannotRetry):], msgCannotRetryEnd)
		if !found {
			return 0, false
		}
		return messageKind(inner)
	case strings.HasPrefix(msg, msgStreamError):
		// "stream error: stream ID 3; REFUSED_STREAM" and an optional
		// "; cause".
		_, rest, found := strings.Cut(msg[len(msgStreamError):], "; ")
		if !found {
			return 0, false
		}
		code, _, _ := strings.Cut(rest, ";")
		switch code {
		case nameRefusedStream:
			return KindConnect, true
		case nameInadequateSecured, nameHTTP11Required:
			return 0, true
		}
		return KindRead, true
	}
	return 0, false
}
