package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnavailable means no daemon answers on the socket.
var ErrUnavailable = errors.New("daemon unavailable")

// ErrNoAnswer means a daemon accepted the connection but did not answer in
// time: it is stopped (SIGSTOP), hung or overloaded. It is an
// ErrUnavailable too, but starting another daemon would not help: one
// holds the socket.
var ErrNoAnswer = fmt.Errorf("%w: no answer", ErrUnavailable)

// DefaultTimeout bounds an ordinary request (everything but the long poll
// of Wait and the streams of Events and Logs): a daemon frozen by SIGSTOP
// accepts connections in the kernel and never answers them.
const DefaultTimeout = 10 * time.Second

// waitPoll is the server-side long poll of Wait; postmortemWait how long
// the daemon waits for a report that is being written.
const (
	waitPoll       = 60 * time.Second
	postmortemWait = 10 * time.Second
)

// Client talks to loopd over its Unix socket, or to a fleet's API node
// over HTTP(S) (NewClientURL).
type Client struct {
	socket  string // names the daemon in errors: the socket, or the URL
	base    string // what request URLs start with: http://loopd for a socket
	http    *http.Client
	timeout time.Duration // of an ordinary request; 0 = none
	remote  bool          // reached through LOOPD_URL
}

// NewClient returns a Client for the daemon listening on socket.
func NewClient(socket string) *Client {
	return NewClientDial(socket, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", socket)
		if err != nil {
			return nil, err
		}
		// Only the user's own daemon: see PeerError.
		if err := checkPeer(conn, socket); err != nil {
			conn.Close()
			return nil, &net.OpError{Op: "dial", Net: "unix", Addr: conn.RemoteAddr(), Err: err}
		}
		return conn, nil
	})
}

// Dialer opens a connection to the daemon.
type Dialer func(ctx context.Context) (net.Conn, error)

// NewClientDial returns a Client that reaches the daemon through dial
// instead of the Unix socket; socket only names the daemon in errors. It
// is the seam that lets loopctl's commands be tested against an
// in-process server (net/http/httptest): everything above the connection,
// the timeouts and how a failed dial or a lost connection is classified
// (ErrUnavailable, ErrNoAnswer), is the same as with a real daemon.
func NewClientDial(socket string, dial Dialer) *Client {
	tr := &http.Transport{
		DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		MaxIdleConns:    4,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{socket: socket, base: "http://loopd", http: &http.Client{Transport: tr}, timeout: DefaultTimeout}
}

// SetTimeout changes the bound of an ordinary request (DefaultTimeout);
// 0 removes it. Wait allows its long poll on top of it.
func (c *Client) SetTimeout(d time.Duration) { c.timeout = d }

// Socket is the path the client connects to.
func (c *Client) Socket() string { return c.socket }

// Ping checks that a daemon answers.
func (c *Client) Ping(ctx context.Context) (DaemonInfo, error) {
	var info DaemonInfo
	err := c.do(ctx, http.MethodGet, "/v1/daemon", nil, nil, &info)
	return info, err
}

// StopDaemon asks the daemon to exit.
func (c *Client) StopDaemon(ctx context.Context, req DaemonStopRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/daemon/stop", nil, req, nil)
}

// CreateRun creates a run and returns it.
func (c *Client) CreateRun(ctx context.Context, req CreateRunRequest) (Run, error) {
	var run Run
	err := c.do(ctx, http.MethodPost, "/v1/runs", nil, req, &run)
	return run, err
}

// ListOptions filters ListRuns.
type ListOptions struct {
	Status    RunStatus
	Workspace string // "" = every workspace
	Limit     int
}

// ListRuns lists runs, newest first.
func (c *Client) ListRuns(ctx context.Context, opts ListOptions) ([]Run, error) {
	q := url.Values{}
	if opts.Status != "" {
		q.Set("status", string(opts.Status))
	}
	if opts.Workspace != "" {
		q.Set("workspace", opts.Workspace)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	var runs []Run
	err := c.do(ctx, http.MethodGet, "/v1/runs", q, nil, &runs)
	return runs, err
}

// RunRef names a run: an id, a unique id prefix, or "last" (the newest run
// in Workspace).
type RunRef struct {
	Ref       string
	Workspace string
}

func (r RunRef) path(suffix string) string {
	return "/v1/runs/" + url.PathEscape(r.Ref) + suffix
}

func (r RunRef) query() url.Values {
	q := url.Values{}
	if r.Workspace != "" {
		q.Set("workspace", r.Workspace)
	}
	return q
}

// GetRun returns a run; debug adds the evaluation history.
func (c *Client) GetRun(ctx context.Context, ref RunRef, debug bool) (Run, error) {
	q := ref.query()
	if debug {
		q.Set("debug", "1")
	}
	var run Run
	err := c.do(ctx, http.MethodGet, ref.path(""), q, nil, &run)
	return run, err
}

// Steps lists a run's steps in order.
func (c *Client) Steps(ctx context.Context, ref RunRef) ([]Step, error) {
	var steps []Step
	err := c.do(ctx, http.MethodGet, ref.path("/steps"), ref.query(), nil, &steps)
	return steps, err
}

// Stop asks a run to stop after its current step, or at once.
func (c *Client) Stop(ctx context.Context, ref RunRef, req StopRequest) (Run, error) {
	var run Run
	err := c.do(ctx, http.MethodPost, ref.path("/stop"), ref.query(), req, &run)
	return run, err
}

// Pause holds a run after its current step.
func (c *Client) Pause(ctx context.Context, ref RunRef) (Run, error) {
	var run Run
	err := c.do(ctx, http.MethodPost, ref.path("/pause"), ref.query(), struct{}{}, &run)
	return run, err
}

// Resume continues a paused or ended run.
func (c *Client) Resume(ctx context.Context, ref RunRef, req ResumeRequest) (Run, error) {
	var run Run
	err := c.do(ctx, http.MethodPost, ref.path("/resume"), ref.query(), req, &run)
	return run, err
}

// Answer answers the question the run's agent asked (the run is WAITING
// with reason needs_answer) and resumes the run.
func (c *Client) Answer(ctx context.Context, ref RunRef, text string) (Run, error) {
	var run Run
	err := c.do(ctx, http.MethodPost, ref.path("/answer"), ref.query(), AnswerRequest{Text: text}, &run)
	return run, err
}

// Signal raises the run's user_signal condition.
func (c *Client) Signal(ctx context.Context, ref RunRef) (Run, error) {
	var run Run
	err := c.do(ctx, http.MethodPost, ref.path("/signal"), ref.query(), struct{}{}, &run)
	return run, err
}

// Wait blocks until the run ends (or ctx is done) and returns it.
func (c *Client) Wait(ctx context.Context, ref RunRef) (Run, error) {
	for {
		var run Run
		q := ref.query()
		q.Set("timeout", waitPoll.String())
		within := time.Duration(0)
		if c.timeout > 0 {
			within = waitPoll + c.timeout
		}
		err := c.doWithin(ctx, within, http.MethodGet, ref.path("/wait"), q, nil, &run)
		if err != nil {
			return run, err
		}
		if run.Status.Terminal() {
			return run, nil
		}
		// The server's long poll timed out; ask again.
	}
}

// Postmortem returns the report of an ended run.
func (c *Client) Postmortem(ctx context.Context, ref RunRef) (Postmortem, error) {
	var pm Postmortem
	// The daemon waits up to postmortemWait for a report being written.
	within := time.Duration(0)
	if c.timeout > 0 {
		within = postmortemWait + c.timeout
	}
	err := c.doWithin(ctx, within, http.MethodGet, ref.path("/postmortem"), ref.query(), nil, &pm)
	return pm, err
}

// Events streams a run's events after seq. With follow it goes on live until
// the run's terminal event has been delivered; without, it ends after the
// stored events.
func (c *Client) Events(ctx context.Context, ref RunRef, after int64, follow bool) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		q := ref.query()
		q.Set("after", strconv.FormatInt(after, 10))
		if follow {
			q.Set("follow", "1")
		}
		body, err := c.stream(ctx, ref.path("/events"), q)
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer body.Close()
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 64*1024), 16<<20)
		for sc.Scan() {
			var ev Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				yield(Event{}, fmt.Errorf("decode event: %w", err))
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil && ctx.Err() == nil {
			yield(Event{}, c.transportError(err))
		}
	}
}

// LogsOptions selects what Logs streams.
type LogsOptions struct {
	Step   int  // step seq; 0 = every step in order
	Follow bool // keep streaming as output is written, until the run ends
	// JSON streams NDJSON objects {"seq","phase","text"} instead of raw
	// bytes with a header line between steps.
	JSON bool
	// Skip drops the first Skip bytes of the text stream of every step
	// (not with JSON or Step): the stream is the same bytes each time it
	// is read, so a follower that lost its connection resumes exactly
	// where it was.
	Skip int64
}

// Logs streams step output: raw bytes, in order, never split inside a UTF-8
// character. The caller closes the reader.
func (c *Client) Logs(ctx context.Context, ref RunRef, opts LogsOptions) (io.ReadCloser, error) {
	q := ref.query()
	if opts.Step > 0 {
		q.Set("step", strconv.Itoa(opts.Step))
	}
	if opts.Follow {
		q.Set("follow", "1")
	}
	if opts.JSON {
		q.Set("format", "json")
	}
	if opts.Skip > 0 {
		q.Set("skip", strconv.FormatInt(opts.Skip, 10))
	}
	return c.stream(ctx, ref.path("/logs"), q)
}

func (c *Client) stream(ctx context.Context, path string, q url.Values) (io.ReadCloser, error) {
	resp, err := c.streamResponse(ctx, path, q)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// streamResponse is a GET whose successful answer is read as it comes: the
// caller closes its body. An error answer is decoded (and closed) here.
func (c *Client) streamResponse(ctx context.Context, path string, q url.Values) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	return c.doWithin(ctx, c.timeout, method, path, q, in, out)
}

// doWithin is one request and its answer, bounded by within (0 = only by
// ctx). Running out of time is ErrNoAnswer, never the caller's own
// deadline.
func (c *Client) doWithin(ctx context.Context, within time.Duration, method, path string, q url.Values, in, out any) (err error) {
	if within > 0 {
		parent := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, within)
		defer cancel()
		defer func() {
			if err != nil && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = fmt.Errorf("%w: loopd on %s did not answer within %s; it may be stopped (SIGSTOP), hung or overloaded",
					ErrNoAnswer, c.socket, within)
			}
		}()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return decodeError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return c.transportError(err)
		}
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}

// transportError classifies a failed round trip: a daemon that is not there
// (no socket, connection refused) or that went away mid-request (it was
// restarted or killed) is ErrUnavailable; the caller's own cancellation
// stays what it is.
func (c *Client) transportError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		// LOOPD_URL's node: nothing was sent, the token included.
		return fmt.Errorf("%w: %s: its TLS certificate is not trusted by this machine, so nothing was sent: %v", ErrUnavailable, c.socket, certErr.Err)
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		// Both wrapped: callers tell "no daemon" (ENOENT, ECONNREFUSED)
		// from "not yours" (EACCES) with errors.Is.
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, c.socket, opErr.Err)
	}
	return fmt.Errorf("%w: connection to %s lost: %v", ErrUnavailable, c.socket, err)
}

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb errorBody
	if err := json.Unmarshal(b, &eb); err == nil && eb.Error != nil {
		eb.Error.Status = resp.StatusCode
		return eb.Error
	}
	return &Error{Status: resp.StatusCode, Code: CodeInternal,
		Message: fmt.Sprintf("daemon answered %s: %s", resp.Status, bytes.TrimSpace(b))}
}

// DashboardLogin asks for a one-time dashboard login URL.
func (c *Client) DashboardLogin(ctx context.Context, req DashboardLoginRequest) (DashboardLogin, error) {
	var out DashboardLogin
	err := c.do(ctx, http.MethodPost, "/v1/dashboard/login", nil, req, &out)
	return out, err
}

// PeerError is a socket served by a process of another user. In a
// directory others can write to (LOOPD_SOCKET in /tmp), another user can
// bind the socket before the daemon does, or in its place: what loopctl
// sent there (goals, commands, the dashboard's login codes) would go to
// them, and what they answered would be taken for the daemon's word.
// Nothing is sent once the peer is known not to be the user's.
type PeerError struct {
	Socket string
	UID    int // the uid of the process serving the socket
}

func (e *PeerError) Error() string {
	who := "uid " + strconv.Itoa(e.UID)
	if u, err := user.LookupId(strconv.Itoa(e.UID)); err == nil {
		who += " (" + u.Username + ")"
	}
	return fmt.Sprintf("%s is served by %s, not by you (uid %d): a loopd serves only the user who started it, "+
		"so this is another user's process; nothing was sent to it", e.Socket, who, os.Geteuid())
}

// Unwrap makes a PeerError a permission error: like a socket loopctl may
// not connect to, it is someone else's, and starting a daemon of one's
// own on that path cannot help.
func (e *PeerError) Unwrap() error { return fs.ErrPermission }

// checkPeer refuses a connection whose server is not the user's own
// process, by the credentials the kernel recorded when it listened
// (SO_PEERCRED): they cannot be forged.
func checkPeer(conn net.Conn, socket string) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("read the credentials of %s's server: %w", socket, credErr)
	}
	if int(cred.Uid) != os.Geteuid() {
		return &PeerError{Socket: socket, UID: int(cred.Uid)}
	}
	return nil
}
