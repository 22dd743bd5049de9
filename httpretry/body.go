package httpretry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
)

// Bounds on draining a failed response's body before it is closed. Reading a
// small error body to its end lets the connection be reused; a larger or
// slower one is cheaper to abandon with its connection.
const (
	drainLimit = 16 << 10
	drainTime  = time.Second
)

// drain reads what is left of a response body to its end if that end comes
// within drainLimit bytes and within drainTime (or within, if it is not
// negative and shorter), and closes it, once. Only a body read to its end
// gives its connection back to the pool. A body known to be longer is not
// read at all. It returns the body it read, whole or not, which the loop
// keeps in case the retry it drained for is refused after all.
func drain(resp *http.Response, within time.Duration) *keptBody {
	if resp.ContentLength > drainLimit {
		_ = resp.Body.Close()
		return &keptBody{}
	}
	limit := drainTime
	if within >= 0 {
		limit = min(limit, within)
	}
	// A server that stalls mid-body must not hold the retry: closing the
	// body ends the read.
	timer := time.AfterFunc(limit, func() { _ = resp.Body.Close() })
	// One byte past the limit: a body of exactly drainLimit bytes whose end
	// comes in a later read (a chunked body's last chunk) must be read to
	// its end, or its connection is lost.
	var kept bytes.Buffer
	_, err := io.CopyN(&kept, resp.Body, drainLimit+1)
	if timer.Stop() { // else the timer closed it
		_ = resp.Body.Close()
	}
	b := &keptBody{whole: err == io.EOF}
	b.r.Reset(kept.Bytes())
	return b
}

// errBodyDropped is what reading a failed response's body returns after
// the part the Transport kept, when the response comes back after all.
var errBodyDropped = errors.New("httpretry: the rest of the failed response's body was dropped before the wait for a retry, to free its connection")

// keptBody is the body of a failed response that was drained before the
// wait for a retry that was then refused: what the drain read of it, then
// io.EOF if that was the whole body, errBodyDropped if not.
type keptBody struct {
	r     bytes.Reader
	whole bool
}

func (b *keptBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && !b.whole {
		err = errBodyDropped
	}
	return n, err
}

func (b *keptBody) Close() error { return nil }

// closeBody closes the body of a request that will not be sent, unless it is
// the guarded body, which the loop closes when it ends.
func closeBody(req *http.Request, guard *guardedBody) {
	if req.Body != nil && req.Body != io.ReadCloser(guard) {
		_ = req.Body.Close()
	}
}

// errBodyTooLarge explains a request that was not retried because its body
// could not be buffered.
var errBodyTooLarge = errors.New("httpretry: request body larger than BufferBody, so it cannot be replayed")

// errBodyConsumed explains a request that was not retried because its body
// had been sent and cannot be read again.
var errBodyConsumed = errors.New("httpretry: request body was sent and has no GetBody, so it cannot be replayed")

// body produces each attempt's request body.
type body struct {
	getBody func() (io.ReadCloser, error) // replays the body; nil if it cannot be replayed
	guard   *guardedBody                  // the unreplayable body, replayed only while it is unread
	tooLong bool                          // the body exceeded BufferBody
	sure    bool                          // no read of it can fail: none, or one the Transport buffered
}

// newBody prepares req's body for replay. It may replace req.Body (when it
// buffers or guards it), so req must be the Transport's own copy.
func newBody(req *http.Request, bufferLimit int64) (body, error) {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return body{getBody: func() (io.ReadCloser, error) { return http.NoBody, nil }, sure: true}, nil
	case req.GetBody != nil:
		return body{getBody: req.GetBody}, nil
	case bufferLimit > 0:
		buf, err := io.ReadAll(io.LimitReader(req.Body, bufferLimit+1))
		if err != nil {
			_ = req.Body.Close()
			return body{}, err
		}
		if int64(len(buf)) > bufferLimit {
			// Too large to hold: send what was read and the rest as one
			// stream, never replayed once the transport has read from it.
			// Until then it is as good as new: guard it, so that a refused
			// dial does not lose it.
			g := &guardedBody{rc: struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(buf), req.Body), req.Body}}
			req.Body = g
			return body{guard: g, tooLong: true}, nil
		}
		_ = req.Body.Close()
		get := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
		req.Body, _ = get()
		req.GetBody = get
		return body{getBody: get, sure: true}, nil
	}
	g := &guardedBody{rc: req.Body}
	req.Body = g
	return body{guard: g}, nil
}

// replayable reports whether the body can be sent again after a failure of
// the given kind.
func (b *body) replayable(kind Kind) bool {
	if b.getBody != nil {
		return true
	}
	// A body nobody read can be sent again after a failure to connect: the
	// transport never touched it, and the guard kept it open.
	return b.guard != nil && kind == KindConnect && !b.guard.read.Load()
}

// why explains a body that cannot be replayed.
func (b *body) why() error {
	if b.tooLong {
		return errBodyTooLarge
	}
	return errBodyConsumed
}

// next returns the body for another attempt; replayable must have said yes.
func (b *body) next() (io.ReadCloser, error) {
	if b.getBody != nil {
		return b.getBody()
	}
	return b.guard, nil
}

// watch returns the request to send for an attempt, req itself or a copy
// whose body is watched, and the watch: nil for a body whose reads cannot
// fail. The guard watches the body it guards at no further cost.
func (b *body) watch(req *http.Request) (*http.Request, *bodyWatch) {
	switch {
	case b.sure:
		return req, nil
	case b.guard != nil && req.Body == io.ReadCloser(b.guard):
		return req, &b.guard.watch
	}
	return watch(req)
}

// watch returns a copy of req whose body is watched, and the watch, or req
// and nil if its body cannot fail to read. The copy and its watched body are
// one allocation: a request's own copy would be a second.
func watch(req *http.Request) (*http.Request, *bodyWatch) {
	if req.Body == nil || req.Body == http.NoBody || inMemory(req.Body) {
		return req, nil
	}
	w := &watchedRequest{req: *req}
	w.body = watchedBody{rc: req.Body, watch: &w.watch}
	w.req.Body = &w.body
	if get := req.GetBody; get != nil {
		// net/http sends the request again itself, with a body from
		// GetBody, when a reused connection dies before the response
		// (HTTP/2: a refused stream, a GOAWAY): that body is this
		// attempt's too.
		w.req.GetBody = func() (io.ReadCloser, error) {
			rc, err := get()
			if err != nil || rc == nil || rc == http.NoBody || inMemory(rc) {
				return rc, err
			}
			return &watchedBody{rc: rc, watch: &w.watch}, nil
		}
	}
	return &w.req, &w.watch
}

// The types of io.NopCloser's bodies, with and without io.WriterTo.
var (
	nopCloserType         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterToType = reflect.TypeOf(io.NopCloser(strings.NewReader("")))
)

// inMemory reports whether rc is a body whose reads cannot fail: the one
// http.NewRequest makes of a bytes.Buffer, bytes.Reader or strings.Reader,
// and its GetBody returns, io.NopCloser around it. net/http unwraps
// io.NopCloser the same way; it spares the common request its copy.
func inMemory(rc io.ReadCloser) bool {
	if t := reflect.TypeOf(rc); t != nopCloserType && t != nopCloserWriterToType {
		return false
	}
	switch reflect.ValueOf(rc).Field(0).Interface().(type) {
	case *bytes.Reader, *bytes.Buffer, *strings.Reader:
		return true
	}
	return false
}

// bodyWatch tells a request body that failed to read from an attempt that
// failed otherwise: it keeps the first error a Read of the attempt's bodies
// returned, io.EOF aside (a watchedBody leaves out the reads its close cut
// short, no fault of the body's; the guard's close is deferred).
type bodyWatch struct {
	err atomic.Pointer[error]
}

func (w *bodyWatch) note(err error) {
	if err != nil && err != io.EOF {
		// A copy of its own: the address of err would move every
		// call's err to the heap, a successful read's included.
		p := new(error)
		*p = err
		w.err.CompareAndSwap(nil, p)
	}
}

// failure returns the body's error, or nil; w may be nil.
func (w *bodyWatch) failure() error {
	if w == nil {
		return nil
	}
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
}

// watchedRequest is an attempt's request with its body watched.
type watchedRequest struct {
	req   http.Request
	body  watchedBody
	watch bodyWatch
}

// watchedBody is a request body whose reads are watched. The transport may
// read and close it after RoundTrip returned (http.RoundTripper's contract
// allows it), so it lives with the attempt's request, never in a pooled
// loop.
type watchedBody struct {
	rc     io.ReadCloser
	closed atomic.Bool // a read its close cut short is no fault of the body's
	watch  *bodyWatch
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if !b.closed.Load() {
		b.watch.note(err)
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.closed.Store(true)
	return b.rc.Close()
}

// bodyError is an attempt that failed because its request's own body did:
// the caller's fault, which no retry mends and no host is to blame for.
type bodyError struct{ err error }

func (e *bodyError) Error() string {
	return "httpretry: the request body failed to read: " + e.err.Error()
}
func (e *bodyError) Unwrap() error { return e.err }

// RetryInfo blames the client, and a breaker counts that as neither a
// failure nor a success.
func (e *bodyError) RetryInfo() retry.Info {
	return retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}
}

// release hands the guarded body back to the transport's normal handling:
// called once no further attempt will reuse it.
func (b *body) release() {
	if b.guard != nil {
		b.guard.release()
	}
}

// guardedBody keeps an unreplayable request body open across a failed
// attempt. The transport closes request bodies even when it never read them
// (after a failed dial); the guard defers that close until the request is
// over, so that an unread body can be sent again.
type guardedBody struct {
	rc    io.ReadCloser
	read  atomic.Bool
	watch bodyWatch // its close is deferred, so every failed read is the body's

	mu       sync.Mutex
	closed   bool // the transport closed it while it was guarded
	released bool // closes go straight through
}

func (g *guardedBody) Read(p []byte) (int, error) {
	g.read.Store(true)
	n, err := g.rc.Read(p)
	g.watch.note(err)
	return n, err
}

func (g *guardedBody) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return g.rc.Close()
	}
	g.closed = true
	return nil
}

// release stops guarding: a close that already happened is carried out now,
// and later ones go straight through.
func (g *guardedBody) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return
	}
	g.released = true
	if g.closed {
		_ = g.rc.Close()
	}
}

// cancelBody ends an attempt's context when the caller closes the response
// body, so that a per-attempt timeout covers reading the body but not beyond.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
