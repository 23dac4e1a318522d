package tcpguard

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTCPListenerRefusesNonLoopback(t *testing.T) {
	if _, err := Listen("0.0.0.0:0", false); err == nil || !strings.Contains(err.Error(), "--http-allow-remote") {
		t.Errorf("Listen on 0.0.0.0 = %v; want a refusal naming --http-allow-remote", err)
	}
	if _, err := Listen("not-an-address", false); err == nil {
		t.Error("Listen accepted a malformed address")
	}
}

// The token is created owner-only on first use and read back after; one
// too short is refused, naming the file; a readable one is made 0600.
func TestLoadToken(t *testing.T) {
	home := t.TempDir()
	tok, err := LoadToken(home)
	if err != nil || len(tok) != 64 {
		t.Fatalf("new token %q %v, want 64 hex characters", tok, err)
	}
	path := filepath.Join(home, TokenFile)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v, want mode 0600", fi, err)
	}
	if again, err := LoadToken(home); err != nil || again != tok {
		t.Fatalf("read back %q %v, want %q", again, err, tok)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadToken(home); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("a readable token file stays %04o, want 0600", fi.Mode().Perm())
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadToken(home); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a short token: %v, want a refusal naming %s", err, path)
	}
}

// The scheme's name is case-insensitive; the token is not, and an empty
// token never matches.
func TestTokenOK(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		header, token string
		want          bool
	}{
		{"Bearer " + tok, tok, true},
		{"bearer " + tok, tok, true},
		{"Bearer   " + tok, tok, true},
		{"Bearer " + strings.ToUpper(tok), tok, false},
		{"Basic " + tok, tok, false},
		{tok, tok, false},
		{"Bearer ", "", false},
		{"", "", false},
	} {
		r := httptest.NewRequest("GET", "/v1/runs", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		if got := TokenOK(r, tc.token); got != tc.want {
			t.Errorf("Authorization %q against %q: %v, want %v", tc.header, tc.token, got, tc.want)
		}
	}
}
