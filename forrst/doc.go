// Package forrst implements the parts of the Forrst RPC protocol that its
// retry extension needs: the request and response documents, the retry,
// rate-limit and idempotency extensions, a Server that attaches retry
// guidance to failures, and a Client that obeys it through package retry.
//
// # Documents
//
// A Request calls one function with JSON arguments; a Response carries a
// result or errors, and extensions ({urn, options} in requests, {urn, data}
// in responses). DecodeRequest and DecodeResponse read documents strictly and
// safely: a size limit, one JSON object and nothing after it, the right
// types, no member of theirs given twice in any letter case; the extension
// decoders (Extension.Retry, RateLimit, IdempotencyOptions, Idempotency)
// refuse unknown members, strategies and units, and negative or
// unrepresentable numbers (an after in hours or days is read in minutes).
// Their member names match exactly (RFC 8259, section 8.3):
// a name in another letter case ("Allowed") is unknown, and a member given
// twice is refused, where encoding/json alone would take the last of them.
// Nothing a peer sends makes them panic.
//
// # The retry extension
//
// A failed response carries urn:forrst:ext:retry with the server's guidance:
// whether to retry, how to space retries (immediate, fixed, or exponential:
// after × 2^(n-1) before retry n), and max_attempts. This package reads
// max_attempts as a number of retries, not of attempts: the extension's own
// table gives DEADLINE_EXCEEDED "immediate, 1", and its "Immediate Retry
// Allowed" example shows that as one retry allowed, whereas counting the
// first attempt would allow none. DefaultGuidance holds the extension's
// default table; codes outside it get {"allowed": false}.
//
// # Server and client
//
// Server is an http.Handler serving registered Functions. It attaches the
// table's guidance to every failure, or guidance set per function
// (WithGuidance) or per error (GuidanceFor); it reports each caller's window
// with the rate-limit extension when it has a RateLimiter, answering calls
// beyond the limit with RATE_LIMITED and guidance that waits for the window
// to reset; and it honours idempotency keys: a call repeated with the same
// key and arguments gets the stored result without running the function
// again, one still running gets IDEMPOTENCY_PROCESSING, and one with other
// arguments IDEMPOTENCY_CONFLICT. What is stored is a call's outcome: a
// result, or a failure whose guidance forbids a retry, not a failure the
// client may retry. HTTP statuses follow the Forrst transport
// (429 with Retry-After for RATE_LIMITED, 503 for UNAVAILABLE, and so on).
//
// Client calls functions through retry.Do. Each failed answer becomes a
// *CallError that classifies itself from the guidance, so the client's
// strategy decides within its own limits: the server can make it wait longer
// or stop sooner, never retry more often, sooner, or longer than the
// strategy allows. Guidance the client cannot read is replaced by the table,
// and so is guidance given twice (two retry extensions in one answer, which
// say neither), but its after still sets the least wait (an unknown unit as
// longer than any cap), and its "allowed": false, in any letter case, still
// stops. Calls carry an idempotency key
// kept across retries, so a retry of a call that finished, whose answer was
// lost, gets the stored outcome and does not run it twice; after a failure
// whose guidance allows a retry, the function runs again (see Server for
// what a function must do about it). Client.Breaker, a retry.Breaker
// scoped by URL, makes calls fail at once with retry.ErrCircuitOpen while the
// server is failing.
//
// # The server's permission
//
// A failure is retry.Info.Allowed, the server's own word that it may be
// retried, when the client may retry it (the guidance allows it and the
// call may be repeated) and the server said so itself: it sent that
// guidance, "allowed": true, or a valid Retry-After header (RFC 9110,
// section 10.2.3). The default strategy, retry.Adaptive, retries such a
// failure even when it is a timeout, which it may otherwise refuse for fear
// of overload: a DEADLINE_EXCEEDED with {"allowed": true, "strategy":
// "immediate"}, the retry extension's "Immediate Retry Allowed" example, is
// retried without a wait. Guidance the client took from DefaultGuidance
// because the server sent none is the client's reading, not the server's
// word, and is not Allowed; nor are the rate-limit reset and an error's
// retry_after, which only set the wait. An answer that is not a Forrst
// document is classified as HTTP (httpretry.Transport.Classify), Retry-After
// included.
package forrst
