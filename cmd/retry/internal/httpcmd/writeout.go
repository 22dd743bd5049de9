package httpcmd

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// writeOut is what -w/--write-out reports once the call is over: curl's
// variables, of the final response where curl's are of the last transfer.
type writeOut struct {
	begin     time.Time
	url       string // as asked for
	effective string // the URL of the final request
	method    string // of the final request
	code      int    // the final status, 0 if no response came
	retries   int    // retries made, on every URL of a redirect chain
	redirects int
	exit      int           // the exit status
	total     time.Duration // from the start to the end of the body
	down, up  int64         // bytes of the final response's body as received, of the request's
	header    http.Header   // the final response's
	proto     string        // the final response's, such as HTTP/1.1
	file      string        // -o FILE, "" for stdout
	conn      connTimes     // of the final attempt
}

// vars returns the values of the variables curl users know, by name: the
// common ones, with curl's formats (seconds to the microsecond, a status
// in three digits).
func (w *writeOut) vars() map[string]string {
	seconds := func(d time.Duration) string { return fmt.Sprintf("%.6f", d.Seconds()) }
	speed := func(n int64) string {
		if w.total <= 0 {
			return "0"
		}
		return strconv.FormatInt(int64(float64(n)/w.total.Seconds()), 10)
	}
	code := fmt.Sprintf("%03d", w.code)
	u, _ := url.Parse(w.effective)
	scheme := ""
	if u != nil {
		scheme = strings.ToUpper(u.Scheme) // curl prints it so
	}
	return map[string]string{
		"http_code":          code,
		"response_code":      code,
		"num_retries":        strconv.Itoa(w.retries),
		"num_redirects":      strconv.Itoa(w.redirects),
		"time_total":         seconds(w.total),
		"time_namelookup":    seconds(w.conn.dns),
		"time_connect":       seconds(w.conn.connect),
		"time_appconnect":    seconds(w.conn.tls),
		"time_pretransfer":   seconds(w.conn.ready),
		"time_starttransfer": seconds(w.conn.firstByte),
		"size_download":      strconv.FormatInt(w.down, 10),
		"size_upload":        strconv.FormatInt(w.up, 10),
		"speed_download":     speed(w.down),
		"speed_upload":       speed(w.up),
		"url":                w.url,
		"url_effective":      w.effective,
		"method":             w.method,
		"scheme":             scheme,
		"content_type":       w.header.Get("Content-Type"),
		"http_version":       httpVersion(w.proto),
		"remote_ip":          w.conn.remoteIP,
		"remote_port":        w.conn.remotePort,
		"local_ip":           w.conn.localIP,
		"local_port":         w.conn.localPort,
		"exitcode":           strconv.Itoa(w.exit),
		"filename_effective": w.file,
	}
}

// httpVersion is a protocol as curl's %{http_version} prints it: 1.1, 2.
func httpVersion(proto string) string {
	v := strings.TrimPrefix(proto, "HTTP/")
	if v == "2.0" {
		return "2"
	}
	if v == "" {
		return "0"
	}
	return v
}

// expand writes format to out as curl's -w does: %{name} is a variable,
// %header{name} a header of the final response, %{stderr} and %{stdout}
// switch where the rest goes, %% is %, and \n, \r and \t are escapes. An
// unknown variable is left out, and named on warn, once.
func (w *writeOut) expand(format string, out, errOut io.Writer, warn func(name string)) {
	vars := w.vars()
	dst := out
	for len(format) > 0 {
		switch {
		case strings.HasPrefix(format, "%%"):
			io.WriteString(dst, "%")
			format = format[2:]
		case strings.HasPrefix(format, "%{") && strings.Contains(format, "}"):
			name, rest, _ := strings.Cut(format[2:], "}")
			switch v, ok := vars[name]; {
			case ok:
				io.WriteString(dst, v)
			case name == "stderr":
				dst = errOut
			case name == "stdout":
				dst = out
			default:
				warn(name)
			}
			format = rest
		case strings.HasPrefix(format, "%header{") && strings.Contains(format, "}"):
			name, rest, _ := strings.Cut(format[len("%header{"):], "}")
			io.WriteString(dst, strings.Join(w.header.Values(name), ", "))
			format = rest
		case len(format) >= 2 && format[0] == '\\' && strings.IndexByte("nrt", format[1]) >= 0:
			io.WriteString(dst, map[byte]string{'n': "\n", 'r': "\r", 't': "\t"}[format[1]])
			format = format[2:]
		default:
			io.WriteString(dst, format[:1])
			format = format[1:]
		}
	}
}

// printWriteOut writes the -w format once the call is over, its exit status
// known; an unknown variable is named on stderr, as curl does.
func (c *httpConfig) printWriteOut(std cli.Stdio, wo *writeOut) {
	wo.total = time.Since(wo.begin)
	warned := make(map[string]bool)
	wo.expand(c.writeOut, std.Out, std.Err, func(name string) {
		if !warned[name] {
			warned[name] = true
			fmt.Fprintf(std.Err, "retry: unknown --write-out variable %%{%s}, left out\n", name)
		}
	})
}

// countingReader counts the bytes read through it into *n.
type countingReader struct {
	r io.Reader
	n *int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}
