package httpcmd

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// baseOptions are the curl flags that shape the connections under the
// retrying transport: -k, --cacert and --connect-timeout.
type baseOptions struct {
	insecure       bool          // -k: accept any server certificate
	caFile         string        // --cacert: trust only the CAs in this PEM file
	connectTimeout time.Duration // --connect-timeout; 0 = the default dialer's
}

// base returns the transport the retries go through: http.DefaultTransport's
// settings, with what the flags change. An unreadable or empty --cacert is
// an error for the usage line, found before anything is sent.
func (o baseOptions) base() (http.RoundTripper, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// As curl, retry asks for a compressed body only with --compressed, and
	// then decodes it itself (decodeBody): net/http would ask for gzip
	// unasked and hide that it had.
	t.DisableCompression = true
	if o.connectTimeout > 0 {
		// curl's --connect-timeout bounds the connection up to its TLS
		// handshake; here the dial and the handshake have D each.
		d := &net.Dialer{Timeout: o.connectTimeout, KeepAlive: 30 * time.Second}
		t.DialContext = d.DialContext
		t.TLSHandshakeTimeout = o.connectTimeout
	}
	if o.insecure || o.caFile != "" {
		cfg := &tls.Config{InsecureSkipVerify: o.insecure} //nolint:gosec // asked for with -k
		if o.caFile != "" {
			pem, err := os.ReadFile(o.caFile)
			if err != nil {
				return nil, fmt.Errorf("--cacert: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--cacert %s: no PEM certificate in it", o.caFile)
			}
			cfg.RootCAs = pool
		}
		t.TLSClientConfig = cfg
	}
	return t, nil
}
