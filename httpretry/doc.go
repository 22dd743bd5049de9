// Package httpretry retries HTTP requests: Transport is an http.RoundTripper
// that sends each request through a retry.Strategy, following HTTP's rules on
// what may be repeated.
//
//	client := &http.Client{Transport: &httpretry.Transport{}}
//
// # What is retried
//
// A failure is retried only if it is worth retrying and repeating the request
// is safe:
//
//   - Responses with status 429 (a throttling error), 500, 502, 503 or 504
//     are failures (Transport.Statuses), and so is a 413 (Content Too
//     Large) with a valid Retry-After: on 413, 429, 503 and 504
//     (Transport.RetryAfterStatuses) the server's Retry-After is obeyed, as
//     urllib3 does on the first three, and sets the shortest wait before the
//     retry (see Waiting). Other statuses, 4xx above all, are the caller's
//     business and come back as they are.
//   - A failure whose response carries a valid Retry-After the Transport
//     obeys, Retry-After: 0 included, is the server's permission to retry
//     (RFC 9110, section 10.2.3: the field says when to send the request
//     again), and its retry.Info is Allowed when the request may be
//     repeated. The default strategy then retries even a 504, a timeout it
//     may otherwise refuse for fear of overload; the caps, streaks and
//     quotas still apply.
//     An invalid Retry-After, or the RateLimit fields alone (they say when
//     the client's quota returns, not that this request is welcome), give
//     no permission.
//   - A transport error is a connect failure (the request never reached the
//     server, or the server refused it unprocessed: refused, unreachable,
//     DNS, dial timeout, a connection the server closed before reading the
//     request, an HTTP/2 stream refused with REFUSED_STREAM or left out by a
//     GOAWAY) or a read failure (it may have reached it: reset, EOF before a
//     response, timeout, most other resets of an HTTP/2 stream, an HTTP/2
//     connection lost to a failed health check, a malformed response, a TLS
//     record that fails its integrity check). Errors that
//     retrying cannot fix (a bad certificate or another failed TLS
//     handshake, an unknown host, a malformed request, an HTTP/2 reset asking
//     for HTTP/1.1) and the request's own cancellation are never retried, and
//     neither is an error the Transport does not recognise.
//   - GET, HEAD, OPTIONS, TRACE, PUT and DELETE (Transport.Methods) may be
//     repeated after any such failure. Other methods, POST and PATCH above
//     all, are repeated only after a connect failure, or when the request
//     carries an Idempotency-Key header; Transport.IdempotencyKey adds one,
//     the same on every attempt.
//   - Every attempt sends the same body, replayed with Request.GetBody
//     (http.NewRequest sets it for in-memory bodies). A body that cannot be
//     replayed is sent again only if no byte of it was read (after a connect
//     failure); Transport.BufferBody holds small bodies in memory to lift
//     that limit, and nothing larger is ever buffered.
//   - A request whose own body fails to read while it is sent (a Read of it
//     returns an error other than io.EOF: an upload whose source broke) is
//     the caller's fault, whatever the transport made of it: it is not sent
//     again, a Breaker counts it as neither a failure nor a success, and the
//     error says that the request body failed and wraps the body's error. A
//     body that fails because the request's context ended is the caller
//     giving up, as any cancellation is. To tell, the Transport watches the
//     reads of a body through its own copy of the request, except for bodies
//     whose reads cannot fail: those http.NewRequest makes of a
//     bytes.Buffer, bytes.Reader or strings.Reader, and those it buffered.
//
// # What comes back
//
// A failed response that will be retried is drained (up to 16 KiB) and
// closed, so that its connection is reused. When retrying stops on a
// response, that response comes back unread with a nil error, exactly as the
// base transport returned it: the caller sees the last 503, not an error
// that hides it. If the retry is refused after the drain (a Breaker's
// circuit that opened during the wait), the response comes back all the
// same, with the body the drain read; a body it did not read to its end
// ends in an error that says the rest was dropped. A base that returns a response with a nil Body breaks the
// http.RoundTripper contract; the Transport reads that Body as http.NoBody,
// as net/http's Client does (golang.org/issue/38095). When retrying stops on
// a transport error, the error is a *retry.Error that wraps the last error
// and the reason (errors.Is(err, retry.ErrQuotaExhausted), and so on).
// WithReport and OnAttempt tell how many attempts were made and why they
// stopped.
//
// # Waiting
//
// The wait before a retry comes from the strategy's backoff, and is never
// shorter than the server asked (on 413, 429, 503 and 504): the longest of its
// Retry-After values (on lines of their own or joined on one) and of the IETF
// RateLimit fields' reset when no quota is left, a longer hint never giving a
// sooner retry. A wait the server asks for
// beyond MaxRetryAfter (5 minutes), one too long to represent, or one that
// could not end before the request's deadline, is not started: the last
// response comes back at once. Waits end
// when the request's context does.
//
// # Retry at one layer
//
// Retries at two layers multiply. When the caller retries too
// (retry.CallerRetries: a request made inside an attempt of retry.Do or
// DoValue, a request served through Handler that says it is a retry, or work
// a caller marked with retry.WithCallerRetries), a Transport
// makes one attempt for a failed response and returns it, for the caller to
// judge, and keeps its own retries for the failures the caller cannot see (a
// refused connection, a reset); Transport.Independent turns that off. The
// caller's loop retries the response it was handed even if the caller turns
// it into an error of its own that says nothing about retrying, with the
// response's Retry-After: the Transport tells the loop what it left. Resent
// requests carry Retry-Attempt (RetryAttemptHeader) with their attempt's
// number, which Handler reads on the other side: the first attempt carries
// none, so the calls made to serve it retry as usual, and a caller's claim
// can only make that one request's calls retry less.
//
// # Whether, and when: one place for each
//
// Three parts decide, and each question has one home:
//
//   - The Transport classifies each outcome into a retry.Info (statuses,
//     methods, bodies, the server's wait): whether a failure may be retried.
//   - A Limiter (HXEP-0001's RetryLimiter), if set, decides with HTTP
//     knowledge whether this request will be: MaxErrors, MaxConnectErrors,
//     MaxReadErrors, MaxErrorResponses (urllib3's total, connect, read and
//     status) and All to combine them. It may also change the next request.
//     Transport.Retries is the one dial for the common case.
//   - The retry.Strategy decides what is shared and how long to wait: the
//     attempt limit, the retry quota, the backoff. A Schedule
//     (HXEP-0001's RetrySchedule, an iter.Seq of delays such as WaitFor and
//     ExponentialBackoff) is a backoff, given to the strategy like any other.
//
// A retry happens only when all three agree, and the strategy, which charges
// the quota, is asked last. Without a Strategy, the Transport owns a
// retry.Adaptive with its defaults, scoped per host: 3 attempts, jittered
// exponential backoff, retries that stop after 3 failures in a row to a host
// (and across hosts as most attempts fail), a send-rate limiter when a host
// throttles, and timeouts (a 504, an attempt that timed out) retried only
// as retry.Adaptive allows, which may refuse them for fear of overload
// unless the server gave its permission: a 504 with a Retry-After.
// Transport.Breaker, a retry.Breaker scoped as the strategy (per host), stops
// sending to a failing host for a while: RoundTrip then fails at once with
// an error wrapping retry.ErrCircuitOpen, without dialling.
package httpretry
