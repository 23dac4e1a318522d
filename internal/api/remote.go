package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// remoteRootCAs are the certificate authorities an API node's
// certificate must chain to: nil for the system's (a variable for tests).
var remoteRootCAs *x509.CertPool

// URLError is a LOOPD_URL that cannot name an API node.
type URLError struct {
	URL    string
	Reason string
}

func (e *URLError) Error() string { return fmt.Sprintf("LOOPD_URL %q: %s", e.URL, e.Reason) }

// NewClientURL returns a Client for a fleet's API node at raw (LOOPD_URL:
// https://host[:port][/prefix], or http:// to a loopback address), sending
// token as its bearer token on every request. Everything above the
// connection (the endpoints, their JSON, the timeouts, ErrUnavailable and
// ErrNoAnswer) is what a client of the Unix socket gets.
//
// Plain http:// is refused for any host but a loopback address: the
// bearer token would cross the network readable by anyone on the path. A
// URL with a user, a query or a fragment is refused too: none has a
// meaning here, and a password in it would end up in error messages.
func NewClientURL(raw, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, &URLError{URL: raw, Reason: "does not parse as a URL (use https://host[:port])"}
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, &URLError{URL: raw, Reason: "must start with https:// (or http:// to a loopback address)"}
	case u.Host == "" || u.Hostname() == "":
		return nil, &URLError{URL: raw, Reason: "names no host (use https://host[:port])"}
	case u.User != nil:
		return nil, &URLError{URL: u.Redacted(), Reason: "must not carry a user or password; put the token in LOOPD_TOKEN"}
	case u.RawQuery != "" || u.Fragment != "":
		return nil, &URLError{URL: raw, Reason: "must not have a query or fragment"}
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		return nil, &URLError{URL: raw, Reason: "plain http:// is only for a loopback address: the token would cross the network in clear; use https://"}
	}
	if token = strings.TrimSpace(token); token == "" {
		return nil, errors.New("LOOPD_URL is set but LOOPD_TOKEN is empty: an API node needs a bearer token " +
			"(its LOOPD_HOME/http.token, or one made by `loopctl token create NAME`)")
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return nil, errors.New("LOOPD_TOKEN holds a space or a line break: it must be the token alone")
	}
	base := u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: remoteRootCAs},
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        4,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	hc := &http.Client{
		Transport: bearer{token: token, next: tr},
		// A redirect could send the token to another host (net/http drops
		// it only across hosts, not to another port or scheme): the API
		// never redirects, so none is followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Client{socket: base, base: base, http: hc, timeout: DefaultTimeout, remote: true}, nil
}

// Remote reports whether c reaches an API node through LOOPD_URL rather
// than the socket of the user's own daemon.
func (c *Client) Remote() bool { return c.remote }

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearer adds the token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
