package daemon

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A flood of unauthenticated TCP requests writes one log line, and the
// refusal reveals nothing about the daemon (not LOOPD_HOME, not the token
// file).
func TestTCPRefusalsAreQuietAndSayNothing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback TCP")
	}
	addr := l.Addr().String()
	l.Close()
	core, logs := observer.New(zap.WarnLevel)
	_, home := testDaemon(t, Options{HTTPAddr: addr, Logger: zap.New(core)})
	for i := range 300 {
		resp, err := http.Get("http://" + addr + "/v1/runs")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("request %d: status %d, want 403", i, resp.StatusCode)
		}
		if i == 0 {
			for _, secret := range []string{home, TokenFile, "LOOPD_HOME"} {
				if strings.Contains(string(body), secret) {
					t.Errorf("the refusal reveals %q: %s", secret, body)
				}
			}
			if !strings.Contains(string(body), "bearer token is required") {
				t.Errorf("refusal body: %s", body)
			}
		}
	}
	if n := logs.FilterMessage("refused TCP request without a valid token").Len(); n != 1 {
		t.Errorf("300 refused requests wrote %d log lines, want 1", n)
	}
}
