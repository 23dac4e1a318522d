package main

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// loopctlURL runs loopctl with LOOPD_URL and LOOPD_TOKEN set and nothing
// else to reach: no dial seam, no socket, autostart allowed.
func loopctlURL(t *testing.T, url, token string, args ...string) result {
	t.Helper()
	home := t.TempDir()
	t.Setenv("LOOPD_HOME", home)
	t.Setenv("LOOPD_SOCKET", home+"/loopd.sock")
	t.Setenv("LOOPCTL_NO_AUTOSTART", "")
	t.Setenv("LOOPD_URL", url)
	t.Setenv("LOOPD_TOKEN", token)
	var out, errOut strings.Builder
	root := newRoot(&globalOptions{Out: &out, Err: &errOut})
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	code := exitCode(err, false, &errOut)
	lastErr = err
	return result{out: out.String(), err: errOut.String(), code: code}
}

// lastErr is the error of loopctlURL's last command.
var lastErr error

// Through LOOPD_URL, loopctl talks to the API node's HTTP API with the
// token: token create prints the secret alone on stdout.
func TestTokenCreateThroughURL(t *testing.T) {
	f := newFakeAPI(t)
	var auth []string
	f.handle("POST /v1/tokens", func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		writeJSON(w, http.StatusCreated, api.Token{ID: "abcdef012345", Name: "bob", Secret: "loopd_" + strings.Repeat("a", 64)})
	})
	r := loopctlURL(t, f.srv.URL, "loopd_admin", "token", "create", "bob")
	r.expect(t, 0, lines("loopd_"+strings.Repeat("a", 64)+"\n"), "token abcdef012345 for bob", "not shown again")
	if got := decode[api.TokenRequest](t, f.only("POST", "/v1/tokens")); got.Name != "bob" {
		t.Errorf("request %+v", got)
	}
	if len(auth) != 1 || auth[0] != "Bearer loopd_admin" {
		t.Errorf("Authorization %q", auth)
	}
}

// An API node that does not answer is unavailable (69) naming its URL,
// and no daemon is started, whatever LOOPCTL_NO_AUTOSTART says; a token
// it refuses is 69 too, saying which tokens work.
func TestURLUnreachableOrRefused(t *testing.T) {
	r := loopctlURL(t, "http://127.0.0.1:1", "loopd_x", "list")
	r.expect(t, 69, nil, "http://127.0.0.1:1")
	if strings.Contains(r.err, "LOOPCTL_NO_AUTOSTART") || strings.Contains(r.err, "loopd exited") || strings.Contains(r.err, "start it") {
		t.Errorf("a fleet URL got the local daemon's autostart or its hint:\n%s", r.err)
	}
	if entries, _ := os.ReadDir(os.Getenv("LOOPD_HOME")); len(entries) != 0 {
		t.Errorf("LOOPD_HOME got %d entries: a daemon was started", len(entries))
	}

	t.Setenv("LOOPCTL_NO_AUTOSTART", "1")
	if code, msg := classify(lastErr); code != 69 || strings.Contains(msg, "LOOPCTL_NO_AUTOSTART") {
		t.Errorf("with LOOPCTL_NO_AUTOSTART=1: %d %q, want 69 without the local daemon's hint", code, msg)
	}

	f := newFakeAPI(t)
	f.fail("GET /v1/daemon", api.CodeForbidden, "forbidden: a valid bearer token is required")
	r = loopctlURL(t, f.srv.URL, "loopd_wrong", "list")
	r.expect(t, 69, nil, "refused LOOPD_TOKEN", "loopctl token create")
}
