package daemon

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestRefusalsLogAtMostOncePerInterval(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(core)
	now := time.Unix(1_700_000_000, 0)
	r := &refusals{every: 10 * time.Second, now: func() time.Time { return now }}
	for range 1000 {
		r.note(log, "refused")
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("1000 refusals in an instant wrote %d lines, want 1", n)
	}
	now = now.Add(9 * time.Second)
	r.note(log, "refused")
	if n := logs.Len(); n != 1 {
		t.Fatalf("a refusal within the interval was logged (%d lines)", n)
	}
	now = now.Add(time.Second)
	r.note(log, "refused")
	entries := logs.All()
	if len(entries) != 2 {
		t.Fatalf("after the interval: %d lines, want 2", len(entries))
	}
	if got := entries[1].ContextMap()["refused_since_last_line"]; got != int64(1000) {
		t.Errorf("second line counts %v refusals not logged, want 1000", got)
	}
	if _, ok := entries[0].ContextMap()["refused_since_last_line"]; ok {
		t.Error("the first line counts suppressed refusals")
	}
}

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
