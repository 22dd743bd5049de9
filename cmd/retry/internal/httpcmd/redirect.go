package httpcmd

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// errTooManyRedirects ends a chain of redirects that goes on too long: a
// loop, most likely.
var errTooManyRedirects = errors.New("too many redirects")

// maxRedirects is how many redirects a request follows, net/http's default.
const maxRedirects = 10

// stopRedirects is the client's CheckRedirect: net/http's default policy,
// with an error the exit status can tell apart.
func stopRedirects(_ *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects: %w", len(via), errTooManyRedirects)
	}
	return nil
}

// credentialHeaders are the request headers that carry credentials (-u sets
// Authorization). Proxy-Authorization is one: through an HTTPS proxy's
// tunnel it reaches the origin, and a redirect may change the proxy.
var credentialHeaders = []string{"Authorization", "Cookie", "Proxy-Authorization"}

// keepCredentialsHome removes r's credentials unless r goes to the origin
// (scheme, host and port) of first, the request they were given for, as
// curl does since 7.83 (CVE-2022-27776). net/http compares host names only:
// it would send them to another port of the host, or after an https
// redirect to http in clear text. As in curl, a hop that leads back to the
// origin gets them again, which net/http copies from first; after a hop to
// another host name it copies them no more.
func keepCredentialsHome(r, first *http.Request) {
	if origin(r.URL) == origin(first.URL) {
		return
	}
	for _, name := range credentialHeaders {
		r.Header.Del(name)
	}
}

// origin is u's scheme, host and port, with the scheme's default port
// spelled out.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
