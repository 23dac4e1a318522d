package api

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// LOOPD_URL values that cannot work are refused before anything is sent,
// naming what is wrong; plain http:// only to a loopback address.
func TestNewClientURLRefusals(t *testing.T) {
	for _, tc := range []struct{ url, token, want string }{
		{"ftp://host", "t", "must start with https://"},
		{"host:7777", "t", "must start with https://"},
		{"https://", "t", "names no host"},
		{"https://user:pw@host", "t", "must not carry a user"},
		{"https://host/?a=1", "t", "query or fragment"},
		{"http://192.0.2.1:7777", "t", "only for a loopback address"},
		{"http://loopd.example.com", "t", "only for a loopback address"},
		{"https://host", "", "LOOPD_TOKEN is empty"},
		{"https://host", "a b", "a space or a line break"},
	} {
		_, err := NewClientURL(tc.url, tc.token)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewClientURL(%q, %q): %v, want an error saying %q", tc.url, tc.token, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("the error quotes the password: %v", err)
		}
	}
	for _, ok := range []string{"https://loopd.example.com", "https://10.0.0.1:7777/prefix/", "http://127.0.0.1:7777", "http://[::1]:1", "http://localhost:7777"} {
		if _, err := NewClientURL(ok, "t"); err != nil {
			t.Errorf("NewClientURL(%q): %v", ok, err)
		}
	}
}

// Every request carries the bearer token, under the URL's path prefix; a
// redirect is not followed (it could carry the token elsewhere); a node
// that is not there is ErrUnavailable, as a missing socket is.
func TestClientURLSendsTokenAndFollowsNoRedirect(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization"))
		if r.URL.Path == "/fleet/v1/runs" {
			http.Redirect(w, r, "http://127.0.0.2:1/steal", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"pid": 7}`))
	}))
	defer srv.Close()
	c, err := NewClientURL(srv.URL+"/fleet/", "loopd_secret")
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Ping(context.Background())
	if err != nil || info.PID != 7 {
		t.Fatalf("ping: %+v, %v", info, err)
	}
	if _, err := c.ListRuns(context.Background(), ListOptions{}); err == nil {
		t.Fatal("a redirect was taken for an answer")
	}
	if len(got) != 2 || got[0] != "/fleet/v1/daemon Bearer loopd_secret" || got[1] != "/fleet/v1/runs Bearer loopd_secret" {
		t.Fatalf("requests: %q", got)
	}
	srv.Close()
	if _, err := c.Ping(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ping of a closed node: %v, want ErrUnavailable", err)
	}
}

// An API node whose certificate the machine does not trust is refused:
// the token is never sent over a connection that could be anyone's.
func TestClientURLRefusesAnUntrustedCertificate(t *testing.T) {
	var got []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	c, err := NewClientURL(srv.URL, "loopd_secret")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Ping(context.Background())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "certificate is not trusted") {
		t.Fatalf("ping of a node with a self-signed certificate: %v, want ErrUnavailable naming the certificate", err)
	}
	if len(got) != 0 {
		t.Fatalf("the node received %d requests (with the token)", len(got))
	}
}

// Over HTTPS to a node whose certificate is trusted, the token goes with
// every request, as over plain http to loopback.
func TestClientURLOverHTTPS(t *testing.T) {
	var got []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"pid": 9}`))
	}))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	remoteRootCAs = pool
	defer func() { remoteRootCAs = nil }()
	c, err := NewClientURL(srv.URL, "loopd_secret")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := c.Ping(context.Background()); err != nil || info.PID != 9 {
		t.Fatalf("ping over https: %+v, %v", info, err)
	}
	if len(got) != 1 || got[0] != "Bearer loopd_secret" {
		t.Fatalf("Authorization headers: %q", got)
	}
}
