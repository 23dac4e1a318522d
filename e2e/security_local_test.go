package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Other local users get nothing: these tests act as one, through the real
// binaries.

// Connections to the TCP port, refused or idle, cannot starve the Unix
// socket of file descriptors. With the daemon's limit at 512, 600 refused
// keep-alive connections (each sent one request without a token) and 600
// more that send nothing are opened; loopctl on the socket still answers,
// every refused connection is closed after its answer (Connection: close)
// and those beyond the cap are closed at once.
func TestSecurityLocalTCPCannotStarveTheSocket(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("needs prlimit (util-linux)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback TCP")
	}
	addr := l.Addr().String()
	l.Close()
	e := newEnv(t)
	e.startDaemon("--http", addr)
	pid := e.daemon.Process.Pid
	if out, err := exec.Command("prlimit", "--pid", strconv.Itoa(pid), "--nofile=512:512").CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v\n%s", err, out)
	}

	const n = 600
	refused := make([]net.Conn, n)
	answers := make([]string, n) // "close" when the answer said Connection: close
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				answers[i] = "dial failed"
				return
			}
			refused[i] = c
			// Keep-alive is HTTP/1.1's default: nothing asks to close.
			if _, err := io.WriteString(c, "GET /v1/daemon HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
				answers[i] = "write failed"
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers[i] = "no answer"
				if errors.Is(err, os.ErrDeadlineExceeded) {
					answers[i] += " within 3s"
				}
				return
			}
			resp.Body.Close()
			answers[i] = resp.Status
			if resp.Close {
				answers[i] += " close"
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range refused {
			if c != nil {
				c.Close()
			}
		}
	}()
	idle := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	fds, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	t.Logf("daemon holds %d file descriptors with %d refused and %d idle TCP connections open on the client side", len(fds), n, n)

	// The owner's loopctl, on the Unix socket, still answers.
	if r := e.loopctl("daemon", "status"); r.code != 0 {
		t.Errorf("loopctl daemon status while the TCP port is flooded: exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := e.loopctl("list"); r.code != 0 {
		t.Errorf("loopctl list while the TCP port is flooded: exit %d, want 0\n%s", r.code, r.stderr)
	}

	// Every refused connection got a 403 with Connection: close, and the
	// daemon closed it.
	counts := map[string]int{}
	for _, a := range answers {
		counts[a]++
	}
	if counts["403 Forbidden close"] != n {
		t.Errorf("answers to %d refused keep-alive requests: %v; want all 403 Forbidden with Connection: close", n, counts)
	}
	closed := countClosed(refused, time.Now().Add(3*time.Second))
	if closed != n {
		t.Errorf("%d of %d refused connections were closed by the daemon, want all", closed, n)
	}
	// Idle connections beyond the cap are closed at once; the others when
	// they have not sent their headers in time.
	start := time.Now()
	atOnce := countClosed(idle, start.Add(time.Second))
	if atOnce < n-128 {
		t.Errorf("%d of %d idle connections were closed at once, want at least %d (all beyond the cap of 128)", atOnce, n, n-128)
	}
	open := n - countClosed(idle, start.Add(15*time.Second))
	if open > 0 {
		t.Errorf("%d idle connections that never sent a request are still open after 15s", open)
	}
	t.Logf("idle connections closed at once: %d of %d; all closed after %s", atOnce, n, time.Since(start).Round(100*time.Millisecond))
	fds, _ = os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	t.Logf("daemon holds %d file descriptors after the flood", len(fds))
	if r := e.loopctl("daemon", "status"); r.code != 0 {
		t.Errorf("loopctl daemon status after the flood: exit %d\n%s", r.code, r.stderr)
	}
}

// countClosed counts the connections whose other end closed them by
// deadline (a read that ends in EOF or a reset rather than the deadline),
// reading all at once.
func countClosed(conns []net.Conn, deadline time.Time) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, c := range conns {
		if c == nil {
			continue
		}
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			if _, err := io.Copy(io.Discard, c); !errors.Is(err, os.ErrDeadlineExceeded) {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n
}

// A root daemon refuses a LOOPD_HOME that another user owns (that user
// could swap http.token), or whose http.token another user owns, before
// writing anything: the error names the path, its owner and what to do.
func TestSecurityLocalHomeOfAnotherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the daemon must run as a user other than the home's owner (uid 65534)")
	}
	for _, tc := range []struct {
		name  string
		setup func(home string)
		want  []string
	}{
		{"home owned by uid 65534", func(home string) {
			if err := os.Chown(home, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, []string{"belongs to uid 65534", "not to uid 0", "chown -R 0"}},
		{"http.token owned by uid 65534", func(home string) {
			tok := filepath.Join(home, "http.token")
			if err := os.WriteFile(tok, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(tok, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, []string{"http.token", "belongs to uid 65534"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			if err := os.Mkdir(home, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(home)
			before := listTree(t, home)
			cmd := exec.Command(filepath.Join(binDir, "loopd"), "--http", "127.0.0.1:0")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LOOPD_HOME=" + home, "GORACE=atexit_sleep_ms=0"}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var err error
			select {
			case err = <-exited:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-exited
				t.Fatalf("loopd started on a home it should refuse (still running after 15s)\n%s", stderr.String())
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 64 {
				t.Fatalf("loopd on a home it should refuse: %v, want exit 64\n%s", err, stderr.String())
			}
			for _, w := range append([]string{home, "refusing to start"}, tc.want...) {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("loopd's error does not say %q:\n%s", w, stderr.String())
				}
			}
			if after := listTree(t, home); after != before {
				t.Errorf("the refused loopd wrote to the home:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// listTree lists every path under root with its mode, size and owner.
func listTree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		b.WriteString(p + " " + fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + " " + strconv.Itoa(int(st.Uid)) + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Another user who owns a parent directory links .loop there to a
// directory of the user's: the user's run started below it is refused
// with an error naming the link and its owner, instead of running in the
// other user's directory with their PROMPT.md and Makefile.
func TestSecurityLocalLoopSymlinkOfAnotherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: uid 65534 makes the symlink (setpriv --reuid=65534)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux) to act as uid 65534")
	}
	e := newEnv(t)
	e.startDaemon()
	root := t.TempDir()
	// uid 65534 must reach the tree.
	for d := root; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(root, "victim") // the user's own workspace, with its .loop
	if err := os.MkdirAll(filepath.Join(victim, ".loop"), 0o755); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(root, "shared") // the other user's directory
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(shared, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(root, "attacker-ran")
	as65534 := func(args ...string) {
		t.Helper()
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("as uid 65534: %v: %v\n%s", args, err, out)
		}
	}
	as65534("sh", "-c", `printf 'the other user'"'"'s goal\n' > "$1/PROMPT.md" && printf 'test:\n\ttouch %s\n' > "$1/Makefile" && ln -s "$2" "$1/.loop"`,
		"sh", shared, filepath.Join(victim, ".loop"))
	work := filepath.Join(shared, "work") // where the user starts the run
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(shared, ".loop")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Fatalf("the .loop symlink is not uid 65534's: %v", err)
	}

	r := e.loopctlIn(work, "start", "--set", "agent=command", "--set", "agent_command=true", "--set", "verify_command=make test",
		"--set", "max_iterations=1")
	link := filepath.Join(shared, ".loop")
	if r.code != 64 {
		t.Errorf("start below another user's .loop symlink: exit %d, want 64 (refused)\n%s%s", r.code, r.stdout, r.stderr)
		if id := strings.TrimSpace(r.stdout); id != "" {
			t.Errorf("the run's workspace: %s", e.status(id).Workspace)
		}
	}
	for _, w := range []string{link, "symlink of uid 65534", "nothing was created", "mkdir .loop"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, r.stderr)
		}
	}
	if out := e.must("list", "--json"); strings.Contains(out, shared) {
		t.Errorf("a run exists in the other user's directory:\n%s", out)
	}
	// The way out the error names: a .loop of the user's own is found
	// first, and the run is the user's, in the user's directory.
	if err := os.Mkdir(filepath.Join(work, ".loop"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = e.loopctlIn(work, "start", "--set", "agent=command", "--set", "agent_command=true", "--set", "max_iterations=1", "mine")
	if r.code != 0 {
		t.Fatalf("start with a .loop of the user's own: exit %d\n%s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	if ws := e.status(id).Workspace; ws != work {
		t.Errorf("workspace = %s, want %s", ws, work)
	}
	e.wait(id)
	if _, err := os.Stat(marker); err == nil {
		t.Error("the other user's Makefile ran")
	}
}

// A refused TCP request that announces a body and never sends it is
// closed too: net/http would wait, with no deadline, to discard the
// unread body before closing, and a few hundred such sockets held the
// cap of TCP connections (the owner locked out of the TCP API). Each
// variant gets its refusal and is closed within 3 seconds.
func TestSecurityLocalRefusedRequestWithUnsentBodyClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback TCP")
	}
	addr := l.Addr().String()
	l.Close()
	e := newEnv(t)
	e.startDaemon("--http", addr)
	variants := map[string]string{
		"Content-Length":       "POST /v1/runs HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 1000\r\n\r\n",
		"chunked":              "POST /v1/runs HTTP/1.1\r\nHost: " + addr + "\r\nTransfer-Encoding: chunked\r\n\r\n",
		"Expect: 100-continue": "POST /v1/runs HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n",
		"GET with a body":      "GET /v1/daemon HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 10\r\n\r\n",
		"over the body limit":  "POST /v1/runs HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 300000\r\n\r\n",
	}
	for name, req := range variants {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_ = c.SetReadDeadline(start.Add(3 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to a refused request: %v", err)
			}
			if resp.StatusCode < 400 {
				t.Fatalf("a request without a token got %s", resp.Status)
			}
			_, err = io.Copy(io.Discard, br)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("answered %s, then the connection stayed open for 3s waiting for the body it announced", resp.Status)
			}
			t.Logf("%s, closed after %s", resp.Status, time.Since(start).Round(time.Millisecond))
		})
	}
	if r := e.loopctl("daemon", "status"); r.code != 0 {
		t.Errorf("loopctl daemon status: exit %d\n%s", r.code, r.stderr)
	}
}

// loopctl talks only to a daemon of its own user: a socket that another
// user's process serves (LOOPD_SOCKET in a directory that user controls,
// or bound there before the daemon) is refused by the server's kernel
// credentials before any request is sent, with exit 69 and a message that
// names its owner.
func TestSecurityLocalSocketServedByAnotherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: uid 65534 serves the socket (setpriv --reuid=65534)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux) to act as uid 65534")
	}
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("needs " + py + " for the other user's server")
	}
	e := newEnv(t)
	root, err := os.MkdirTemp("", "ls")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "sd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	sock, got := filepath.Join(dir, "loopd.sock"), filepath.Join(dir, "got")
	// The other user's server: it records what it receives and answers
	// like a daemon would.
	const server = `
import os, socket, sys
sock, got = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX); s.bind(sock); os.chmod(sock, 0o777); s.listen(8)
while True:
    c, _ = s.accept()
    try:
        data = c.recv(65536)
        with open(got, "ab") as f: f.write(data)
        body = b'{"version":"theirs","pid":1}'
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    except OSError:
        pass
    c.close()
`
	srv := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", py, "-c", server, sock, got)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode().Perm() == 0o777 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other user's server did not bind its socket")
		}
		time.Sleep(10 * time.Millisecond)
	}

	for _, args := range [][]string{{"list"}, {"start", "--set", "agent=command", "--set", "agent_command=true", "a goal"}, {"daemon", "status"}, {"daemon", "stop"}} {
		r := e.loopctlEnv([]string{"LOOPD_SOCKET=" + sock}, args...)
		if r.code != 69 {
			t.Errorf("loopctl %s on another user's socket: exit %d, want 69\n%s%s", args[0], r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "uid 65534") {
			t.Errorf("the refusal does not name the socket's owner:\n%s", r.stderr)
		}
	}
	if b, _ := os.ReadFile(got); len(b) > 0 {
		t.Errorf("loopctl sent requests to another user's server:\n%s", b)
	}
}

// A directory above LOOPD_HOME that is writable by a group shared with
// other users lets its members swap the home: it is refused even when it
// is the daemon's own group (here users, gid 100, the daemon running as
// uid 65534 in that group). Only a user-private group's write bit (a
// group of the user's name that no one else is in) is allowed.
func TestSecurityLocalHomeUnderASharedGroupDirectoryRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: loopd runs as uid 65534 in group 100 (setpriv)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	if g, err := user.LookupGroupId("100"); err != nil || g.Name == "nobody" {
		t.Skip("needs a shared group 100 (users)")
	}
	bin, err := os.MkdirTemp("", "lb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	root, err := os.MkdirTemp("", "lg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	for _, d := range []string{bin, root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(binDir, "loopd"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "loopd"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	gw := filepath.Join(root, "gw") // the user's, but group users may write to it
	if err := os.Mkdir(gw, 0o775); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(gw, 0o775); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(gw, 65534, 100); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(gw, "home")
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=100", "--clear-groups", "--", filepath.Join(bin, "loopd"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root, "LOOPD_HOME=" + home, "GORACE=atexit_sleep_ms=0"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		t.Fatalf("loopd started below a directory group users may write to (still running after 15s)\n%s", stderr.String())
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 64 {
		t.Fatalf("loopd below a directory group users may write to: %v, want exit 64\n%s", err, stderr.String())
	}
	for _, w := range []string{gw, "writable by group 100", "chmod g-w"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("loopd's error does not say %q:\n%s", w, stderr.String())
		}
	}
	if _, err := os.Stat(home); err == nil {
		t.Error("the refused loopd created the home")
	}
}

// --log-file is not opened through another user's file: in a sticky
// directory (/tmp) another user can create the path first, as a file
// they can read (0666) or a symlink to a file of the daemon's user. loopd
// refuses it, exit 64, naming the path and its owner, and writes no log
// line into it.
func TestSecurityLocalLogFileOfAnotherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: uid 65534 makes the file (setpriv --reuid=65534)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux) to act as uid 65534")
	}
	root, err := os.MkdirTemp("", "ll")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	stk := filepath.Join(root, "stk") // a /tmp of its own
	if err := os.Mkdir(stk, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(stk, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(root, "precious") // a file of the daemon's user
	if err := os.WriteFile(precious, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, script string
		want         []string
	}{
		{"a 0666 file of uid 65534", `umask 0; : > "$1"`, []string{"belongs to uid 65534"}},
		{"a symlink of uid 65534", `ln -s "$2" "$1"`, []string{"symlink"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := filepath.Join(stk, strings.ReplaceAll(tc.name, " ", "-"))
			out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
				"sh", "-c", tc.script, "sh", logPath, precious).CombinedOutput()
			if err != nil {
				t.Fatalf("as uid 65534: %v\n%s", err, out)
			}
			home := filepath.Join(t.TempDir(), "home")
			cmd := exec.Command(filepath.Join(binDir, "loopd"), "--log-file", logPath)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LOOPD_HOME=" + home, "GORACE=atexit_sleep_ms=0"}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err = <-exited:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-exited
				t.Errorf("loopd started logging to another user's file (still running after 5s)")
			}
			if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 64) {
				t.Errorf("loopd --log-file on another user's file: %v, want exit 64\n%s", err, stderr.String())
			}
			for _, w := range append([]string{logPath, "refusing to start"}, tc.want...) {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("loopd's error does not say %q:\n%s", w, stderr.String())
				}
			}
			if b, _ := os.ReadFile(logPath); len(b) > 0 && string(b) != "precious\n" {
				t.Errorf("loopd wrote its log into another user's file:\n%s", b)
			}
			if b, _ := os.ReadFile(precious); string(b) != "precious\n" {
				t.Errorf("loopd wrote its log through the symlink into %s:\n%s", precious, b)
			}
		})
	}
}
