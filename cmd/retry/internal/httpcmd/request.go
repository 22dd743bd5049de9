package httpcmd

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// request builds the request; cleanup closes the file --data-binary @FILE
// opened.
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
		req.Header.Set("User-Agent", cmp.Or(c.agent, "retry/"+cli.Version()))
	}
	if c.compressed {
		// Asked for, the Transport would leave the decoding to retry:
		// decodeBody does it, for every encoding named here.
		req.Header.Set("Accept-Encoding", "gzip, deflate")
	}
	if len(c.data) > 0 {
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

// requestBody is a request body that every attempt can send again.
type requestBody struct {
	get   func() (io.ReadCloser, error)
	size  int64
	close func()
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
