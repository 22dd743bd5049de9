package httpcmd

import (
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// acceptEncoding is what --compressed asks for: what decodeBody decodes.
const acceptEncoding = "gzip, deflate"

// errUnknownEncoding is a Content-Encoding --compressed cannot decode.
var errUnknownEncoding = errors.New("an encoding retry cannot decode")

// decodeError is a body that is not in the Content-Encoding it names.
type decodeError struct {
	encoding string
	err      error
}

func (e *decodeError) Error() string {
	return fmt.Sprintf("the body is not valid %s, though its Content-Encoding says so: %v", e.encoding, e.err)
}

func (e *decodeError) Unwrap() error { return e.err }

// decodeBody returns the body of resp decoded as its Content-Encoding
// says, for --compressed, as curl does; without it the body is written as
// it came, as curl writes it. The Transport's own decoding is off (see
// baseOptions.base): it asks for gzip unasked, and drops the headers that
// say the body was encoded.
func decodeBody(resp *http.Response) (io.Reader, error) {
	switch enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return resp.Body, nil
	case "gzip", "x-gzip":
		r, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, &decodeError{"gzip", err}
		}
		return decodingReader{r, "gzip"}, nil
	case "deflate":
		r, err := zlib.NewReader(resp.Body)
		if err != nil {
			return nil, &decodeError{"deflate", err}
		}
		return decodingReader{r, "deflate"}, nil
	default:
		return nil, fmt.Errorf("Content-Encoding %q: %w (it decodes %s)", enc, errUnknownEncoding, acceptEncoding)
	}
}

// decodingReader says, for an error in the middle of a body, that the body
// was not what its encoding says; a connection's failure it passes on.
type decodingReader struct {
	r        io.Reader
	encoding string
}

func (d decodingReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != nil && err != io.EOF && transportExit(err, true) == httpExitEncoding {
		err = &decodeError{d.encoding, err}
	}
	return n, err
}
