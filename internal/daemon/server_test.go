package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// testDaemon runs the real daemon in-process on a temporary home and
// returns an HTTP client bound to its Unix socket.
func testDaemon(t *testing.T, opts Options) (*http.Client, string) {
	t.Helper()
	home, err := os.MkdirTemp("", "ldt")
	if err != nil {
		t.Fatal(err)
	}
	opts.Home = home
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("daemon did not stop")
		}
		os.RemoveAll(home)
	})
	sock := filepath.Join(home, "loopd.sock")
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	for range 500 {
		if _, err := api.NewClient(sock).Ping(ctx); err == nil {
			return c, home
		}
		select {
		case err := <-done:
			t.Fatalf("daemon exited: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("daemon did not answer")
	return nil, ""
}

type apiError struct {
	Error api.Error `json:"error"`
}

func do(t *testing.T, c *http.Client, method, path string, body io.Reader) (int, apiError, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://loopd"+path, body)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e apiError
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e, b
}

func TestBadRequestsGetClearErrorsAndChangeNothing(t *testing.T) {
	c, _ := testDaemon(t, Options{})
	ws := t.TempDir()
	file := filepath.Join(ws, "file")
	os.WriteFile(file, nil, 0o600)
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     api.ErrorCode
		msg                      string
	}{
		{"malformed JSON", "POST", "/v1/runs", `{"workspace":`, 400, api.CodeBadRequest, "malformed request body"},
		{"unknown field", "POST", "/v1/runs", `{"workspace":"` + ws + `","agent_command":"rm -rf /"}`, 400, api.CodeBadRequest, `unknown field "agent_command"`},
		{"trailing garbage", "POST", "/v1/runs", `{"workspace":"` + ws + `"} {"again":1}`, 400, api.CodeBadRequest, "unexpected data after the JSON value"},
		{"wrong type", "POST", "/v1/runs", `{"workspace":42}`, 400, api.CodeBadRequest, "malformed request body"},
		{"relative workspace", "POST", "/v1/runs", `{"workspace":"some/dir","goal":"g"}`, 400, api.CodeBadRequest, "must be an absolute path"},
		{"missing workspace", "POST", "/v1/runs", `{"workspace":"/nonexistent/ws","goal":"g"}`, 400, api.CodeBadRequest, "does not exist"},
		{"workspace is a file", "POST", "/v1/runs", `{"workspace":"` + file + `","goal":"g"}`, 400, api.CodeBadRequest, "is not a directory"},
		{"no goal", "POST", "/v1/runs", `{"workspace":"` + ws + `","set":["agent=command","agent_command=true"]}`, 400, api.CodeBadRequest, "no goal"},
		{"bad --set", "POST", "/v1/runs", `{"workspace":"` + ws + `","goal":"g","set":["max_iterations=-1"]}`, 400, api.CodeBadRequest, "max_iterations"},
		{"oversize body", "POST", "/v1/runs", `{"goal":"` + strings.Repeat("x", 2<<20) + `"}`, 413, api.CodeTooLarge, "larger than"},
		{"unknown run", "GET", "/v1/runs/abcdef0123", "", 404, api.CodeNotFound, "not found"},
		{"unknown run (not hex)", "GET", "/v1/runs/..%2F..%2Fetc", "", 404, api.CodeNotFound, "not found"},
		{"bad status filter", "GET", "/v1/runs?status=DANCING", "", 400, api.CodeBadRequest, "unknown status"},
		{"bad limit", "GET", "/v1/runs?limit=0", "", 400, api.CodeBadRequest, "limit"},
		{"unknown endpoint", "GET", "/v1/nothing", "", 404, api.CodeNotFound, "no such endpoint"},
		{"stop an unknown run", "POST", "/v1/runs/abcdef/stop", `{}`, 404, api.CodeNotFound, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, e, raw := do(t, c, tt.method, tt.path, strings.NewReader(tt.body))
			if status != tt.status || e.Error.Code != tt.code || !strings.Contains(e.Error.Error(), tt.msg) {
				t.Errorf("got %d %q %q, want %d %q containing %q\n%s", status, e.Error.Code, e.Error.Error(), tt.status, tt.code, tt.msg, raw)
			}
		})
	}
	status, _, body := do(t, c, "GET", "/v1/runs", nil)
	if status != 200 || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("after bad requests: %d %s; nothing may have been created", status, body)
	}
}

// Garbage and truncated requests on the socket never take the daemon down.
func TestGarbageOnTheSocket(t *testing.T) {
	c, home := testDaemon(t, Options{})
	sock := filepath.Join(home, "loopd.sock")
	for _, junk := range [][]byte{
		{0, 1, 2, 3, 0xff, 0xfe},
		[]byte("GET /v1/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\n{\"trunc"),
		[]byte("POST /v1/runs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
		bytes.Repeat([]byte("A"), 1<<20),
		[]byte("GET /v1/daemon HTTP/1.1\r\n" + strings.Repeat("X-Junk: "+strings.Repeat("y", 1000)+"\r\n", 2000)),
	} {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write(junk)
		_ = conn.(*net.UnixConn).CloseWrite()
		_, _ = io.Copy(io.Discard, conn)
		conn.Close()
	}
	if status, _, _ := do(t, c, "GET", "/v1/daemon", nil); status != 200 {
		t.Fatalf("daemon unhealthy after garbage: %d", status)
	}
}

func TestTCPListenerNeedsTheToken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback TCP")
	}
	addr := l.Addr().String()
	l.Close()
	_, home := testDaemon(t, Options{HTTPAddr: addr})
	tokBytes, err := os.ReadFile(filepath.Join(home, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(home, TokenFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	token := strings.TrimSpace(string(tokBytes))
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"no token", "", 403},
		{"wrong token", "Bearer " + strings.Repeat("0", len(token)), 403},
		{"not bearer", token, 403},
		{"token", "Bearer " + token, 200},
		{"scheme in lower case", "bearer " + token, 200},
		{"another scheme", "Basic " + token, 403},
		{"token with a suffix", "Bearer " + token + "0", 403},
	} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/daemon", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}

// FuzzDecodeRequests feeds arbitrary bodies to the strict request decoder
// for every request type: it must never panic, and what it accepts must
// round-trip.
func FuzzDecodeRequests(f *testing.F) {
	for _, s := range []string{`{}`, `{"workspace":"/ws","goal":"g","set":["a=b"]}`, `{"now":true}`, `{"set":["max_cost=2"]}`,
		`{"kill_steps":true}`, `{"workspace":"/ws"} x`, `[`, `null`, `{"now":"yes"}`, "\xff\xfe"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, newV := range []func() any{
			func() any { return &api.CreateRunRequest{} }, func() any { return &api.StopRequest{} },
			func() any { return &api.ResumeRequest{} }, func() any { return &api.DaemonStopRequest{} },
		} {
			v := newV()
			req := httptest.NewRequest("POST", "/", bytes.NewReader(body))
			err := decode(httptest.NewRecorder(), req, v)
			if err != nil {
				var ae *api.Error
				var mb *http.MaxBytesError
				if !errors.As(err, &ae) && !errors.As(err, &mb) {
					t.Fatalf("decode error of unexpected type %T: %v", err, err)
				}
				continue
			}
			again, _ := json.Marshal(v)
			w := newV()
			if err := decode(httptest.NewRecorder(), httptest.NewRequest("POST", "/", bytes.NewReader(again)), w); err != nil {
				t.Fatalf("re-decoding %s: %v", again, err)
			}
			if b, _ := json.Marshal(w); !bytes.Equal(b, again) {
				t.Fatalf("round trip %s != %s", b, again)
			}
		}
	})
}

// A followed log stream that is quiet for longer than the stall timeout
// (a step printing nothing for a while) is not cut: the deadline only
// guards data a follower leaves unread.
func TestQuietLogStreamIsNotCut(t *testing.T) {
	old := stallTimeout
	stallTimeout = 200 * time.Millisecond
	defer func() { stallTimeout = old }()
	_, home := testDaemon(t, Options{})
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".loop"), 0o755)
	os.WriteFile(filepath.Join(ws, ".loop", "config"), []byte("agent=command\nagent_command=echo hello; sleep 1; echo bye\n"+
		"verify_command=echo checked; sleep 0.6\nmax_iterations=1\n"), 0o644)
	c := api.NewClient(filepath.Join(home, "loopd.sock"))
	if _, err := c.Trust(t.Context(), api.TrustRequest{Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	run, err := c.CreateRun(t.Context(), api.CreateRunRequest{Workspace: ws, Goal: "quiet"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := c.Logs(t.Context(), api.RunRef{Ref: run.ID}, api.LogsOptions{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	out, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("the quiet stream was cut: %v (got %q)", err, out)
	}
	for _, want := range []string{"hello", "bye", "#2 verification", "checked"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("followed logs lack %q:\n%s", want, out)
		}
	}
}
