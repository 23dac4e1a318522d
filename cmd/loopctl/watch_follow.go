package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/transcript"
)

// watchClient is what watch needs of the daemon; *api.Client has it, and
// tests use a small fake.
type watchClient interface {
	GetRun(ctx context.Context, ref api.RunRef, debug bool) (api.Run, error)
	Events(ctx context.Context, ref api.RunRef, after int64, follow bool) iter.Seq2[api.Event, error]
	Logs(ctx context.Context, ref api.RunRef, opts api.LogsOptions) (io.ReadCloser, error)
}

// runFollower follows a run's events until the run has ended.
type runFollower struct {
	client watchClient
	ref    api.RunRef
	// retryFor is how long the daemon may stay unreachable before the
	// follower gives up; pause is the wait between attempts.
	retryFor, pause time.Duration
	// after is the seq to start after (events --after).
	after int64
}

func newRunFollower(c watchClient, ref api.RunRef) *runFollower {
	// A daemon restart (an upgrade, a crash and relaunch) takes seconds, and
	// runs survive it: a watcher should too, rather than exit 69 mid-run.
	return &runFollower{client: c, ref: ref, retryFor: outageLimit, pause: time.Second}
}

// follow calls onEvent for each of the run's events in order, from the
// first after f.after, exactly once each, and returns the run once it has ended. A stream
// that breaks (the daemon restarted) is resumed after the last event seen;
// onRetry is told of each failed attempt. It returns ctx's error when ctx
// ends first.
//
// The end is decided by the run's status, not by the first terminal event:
// an ended run can be resumed, so its history may hold several.
func (f *runFollower) follow(ctx context.Context, onEvent func(api.Event), onRetry func(error)) (api.Run, error) {
	after := f.after
	var failingSince time.Time
	for {
		before := after
		err := f.stream(ctx, &after, true, onEvent)
		if ctx.Err() != nil {
			return api.Run{}, ctx.Err()
		}
		if after > before {
			// The stream got through: an outage after this one is a new
			// outage, with a minute of its own.
			failingSince = time.Time{}
		}
		if err == nil {
			// The daemon ends a followed stream after the run's terminal
			// event, or when it shuts down: the run's status tells which.
			var run api.Run
			if run, err = f.client.GetRun(ctx, f.ref, false); err == nil {
				if run.Status.Terminal() {
					// Events committed after a shutdown cut the stream
					// would be missing: read once more. A followed stream
					// of an ended run stops at its terminal event.
					if err := f.stream(ctx, &after, true, onEvent); err != nil && ctx.Err() == nil {
						return api.Run{}, err
					}
					return run, nil
				}
				failingSince = time.Time{}
			}
		}
		if err != nil {
			if !retryable(err) {
				return api.Run{}, err
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			} else if time.Since(failingSince) > f.retryFor {
				return api.Run{}, err
			}
			if onRetry != nil {
				onRetry(err)
			}
		}
		select {
		case <-ctx.Done():
			return api.Run{}, ctx.Err()
		case <-time.After(f.pause):
		}
	}
}

// stream reads the run's events after *after, moving *after along.
func (f *runFollower) stream(ctx context.Context, after *int64, follow bool, onEvent func(api.Event)) error {
	for ev, err := range f.client.Events(ctx, f.ref, *after, follow) {
		if err != nil {
			return err
		}
		if ev.Seq <= *after {
			continue // never twice, whatever a reconnection replays
		}
		*after = ev.Seq
		onEvent(ev)
	}
	return nil
}

// retryable reports whether err may pass: the daemon is away or going
// away, or the connection broke. An answer such as "no such run" is final.
func retryable(err error) bool {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Code == api.CodeShutdown
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// logChunk is one object of the NDJSON log stream.
type logChunk struct {
	Seq   int    `json:"seq"`
	Phase string `json:"phase"`
	Text  string `json:"text"`
}

// followOutput streams step seq's output to onText, chunk by chunk, until
// the step has ended and its output has been read, or ctx ends: as written
// when raw, else rendered as a transcript (an agent's stream-json made
// readable, line by line). The NDJSON form is used because its chunks never
// split a UTF-8 character.
func followOutput(ctx context.Context, c watchClient, ref api.RunRef, seq int, raw bool, onText func(string) bool) error {
	body, err := c.Logs(ctx, ref, api.LogsOptions{Step: seq, Follow: true, JSON: true})
	if err != nil {
		return err
	}
	defer body.Close()
	if !raw {
		r := transcript.NewRenderer(textFunc(onText))
		defer r.Flush()
		onText = func(text string) bool {
			_, err := r.Write([]byte(text))
			return err == nil
		}
	}
	sc := bufio.NewScanner(body)
	// The daemon reads logs 32 KiB at a time; JSON escaping can grow a
	// chunk several times.
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	for sc.Scan() {
		var ch logChunk
		if err := json.Unmarshal(sc.Bytes(), &ch); err != nil {
			return fmt.Errorf("decode output: %w", err)
		}
		if !onText(ch.Text) {
			return nil
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("read output: %w", err)
	}
	return nil
}

// textFunc is a writer handing what is written to a follower's onText; it
// fails once onText says stop.
type textFunc func(string) bool

func (f textFunc) Write(b []byte) (int, error) {
	if !f(string(b)) {
		return 0, errStopText
	}
	return len(b), nil
}

var errStopText = errors.New("the reader stopped")
