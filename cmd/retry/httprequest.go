package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

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
