package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Response headers of a diff: the commits compared, empty when nothing
// changed.
const (
	HeaderDiffFrom = "Loop-Diff-From"
	HeaderDiffTo   = "Loop-Diff-To"
)

// DaemonStatus is Ping with the disk the run worktrees take (measured, or
// cached for a short while, by the daemon).
func (c *Client) DaemonStatus(ctx context.Context) (DaemonInfo, error) {
	var info DaemonInfo
	err := c.do(ctx, http.MethodGet, "/v1/daemon", url.Values{"disk": {"1"}}, nil, &info)
	return info, err
}

// DiffOptions selects what Diff returns.
type DiffOptions struct {
	Iteration int  // 0: the whole run against its base
	Stat      bool // `git diff --stat` output instead of the patch
	Color     bool // colored for a terminal
}

// Diff streams a run's change as git prints it; from and to are the
// commits compared ("" when nothing changed). The caller closes the reader.
func (c *Client) Diff(ctx context.Context, ref RunRef, opts DiffOptions) (body io.ReadCloser, from, to string, err error) {
	q := ref.query()
	if opts.Iteration > 0 {
		q.Set("iteration", strconv.Itoa(opts.Iteration))
	}
	if opts.Stat {
		q.Set("stat", "1")
	}
	if opts.Color {
		q.Set("color", "1")
	}
	resp, err := c.streamResponse(ctx, ref.path("/diff"), q)
	if err != nil {
		return nil, "", "", err
	}
	return resp.Body, resp.Header.Get(HeaderDiffFrom), resp.Header.Get(HeaderDiffTo), nil
}

// DiffStat returns the size of a run's change (iteration 0: the whole run).
func (c *Client) DiffStat(ctx context.Context, ref RunRef, iteration int) (DiffStat, error) {
	q := ref.query()
	q.Set("format", "json")
	if iteration > 0 {
		q.Set("iteration", strconv.Itoa(iteration))
	}
	var st DiffStat
	err := c.doWithin(ctx, c.slow(), http.MethodGet, ref.path("/diff"), q, nil, &st)
	return st, err
}

// Land lands a worktree run's branch into its base branch, calling
// progress with each progress line while the daemon works (a verification
// can take minutes). It returns the result, or the refusal (a land that
// changed nothing), or an error.
func (c *Client) Land(ctx context.Context, ref RunRef, req LandRequest, progress func(string)) (*LandResult, *LandRefusal, error) {
	var out struct {
		res *LandResult
		ref *LandRefusal
	}
	err := c.ndjson(ctx, http.MethodPost, ref.path("/land"), ref.query(), req, func(line []byte) error {
		var m LandMessage
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("decode land message: %w", err)
		}
		switch {
		case m.Error != nil:
			return m.Error
		case m.Refusal != nil:
			out.ref = m.Refusal
		case m.Result != nil:
			out.res = m.Result
		case m.Progress != "" && progress != nil:
			progress(m.Progress)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if out.res == nil && out.ref == nil {
		return nil, nil, fmt.Errorf("%w: the daemon ended the land without an answer", ErrUnavailable)
	}
	return out.res, out.ref, nil
}

// Clean removes worktrees of ended runs.
func (c *Client) Clean(ctx context.Context, req CleanRequest) (CleanResult, error) {
	var res CleanResult
	err := c.doWithin(ctx, c.slow(), http.MethodPost, "/v1/worktrees/clean", nil, req, &res)
	return res, err
}

// slowTimeout bounds a request whose work grows with a repository (a
// numstat of a huge diff, the removal of worktrees of millions of files).
const slowTimeout = 10 * time.Minute

func (c *Client) slow() time.Duration {
	if c.timeout == 0 {
		return 0
	}
	return slowTimeout
}

// landProgress is how often, at most, the daemon sends a line while a land
// works (it says so while verify_command runs). A silence longer than this
// plus the client's timeout is a daemon that is frozen, not busy.
var landProgress = 15 * time.Second

// ndjson sends a request and calls fn with each line of its NDJSON answer.
// With a client timeout, a silence longer than landProgress plus that
// timeout between lines is ErrNoAnswer.
func (c *Client) ndjson(ctx context.Context, method, path string, q url.Values, in any, fn func([]byte) error) (err error) {
	if c.timeout > 0 {
		parent := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		limit := landProgress + c.timeout
		idle := time.AfterFunc(limit, cancel)
		defer idle.Stop()
		inner := fn
		fn = func(line []byte) error {
			idle.Reset(limit)
			return inner(line)
		}
		defer func() {
			if err != nil && parent.Err() == nil && ctx.Err() != nil {
				err = fmt.Errorf("%w: the daemon at %s sent nothing for %s", ErrNoAnswer, c.socket, limit)
			}
		}()
	}
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path+"?"+q.Encode(), bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return decodeError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	for sc.Scan() {
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return c.transportError(err)
	}
	return nil
}
