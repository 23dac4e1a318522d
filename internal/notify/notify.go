// Package notify tells the user when a run ends, waits or pauses: a
// command of theirs, a webhook (Slack, Discord, ntfy…), or a desktop
// notification, as the run's notify_* config keys ask.
//
// Delivery is durable and never holds a run up. The notifier's Hook runs
// inside the transaction that records the run's state change and its
// event, and writes one outbox row per channel (storage.Notification): the
// state change and "a notification is due" commit together or not at all.
// Run delivers due rows in the background, outside any run's path, and
// records each attempt as a NOTIFICATION_SENT or NOTIFICATION_FAILED event
// in the same transaction that updates the row. A daemon killed while a
// notification is due finds the row still pending when it restarts and
// sends it then; a delivered row is never sent again. (A crash in the
// instant between a delivery and its record repeats that one delivery:
// an outside system cannot take part in loopd's transaction.)
//
// Webhooks are retried with exponential back-off (Options.Backoff doubling
// up to Options.MaxBackoff, at most Options.MaxAttempts attempts) when the
// receiver answers 408, 425, 429 or 5xx or cannot be reached; commands and
// desktop notifications are attempted once.
package notify

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
)

// Options configure a Notifier. Store, Bus and Describe are required.
type Options struct {
	Store *storage.Store
	// Bus wakes the notifier after commits (new outbox rows commit with an
	// event); it ends Run when closed.
	Bus *events.Bus
	// Describe builds the wire view of a run for the message.
	Describe func(ctx context.Context, run storage.Run) (api.Run, error)
	// Dashboard reports whether the daemon serves the dashboard: FAILED
	// and ABORTED messages then say how to open the run's page. Nil: no.
	Dashboard func() bool
	Logger    *zap.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Backoff is the delay before a webhook's second attempt, doubled for
	// each further one up to MaxBackoff (defaults 2s and 10m); MaxAttempts
	// bounds the attempts (default 10: about 17 minutes of retrying).
	Backoff     time.Duration
	MaxBackoff  time.Duration
	MaxAttempts int
	// HTTPClient posts webhooks (default: a client with a WebhookTimeout).
	HTTPClient *http.Client
	// CommandTimeout bounds notify_command (default DefaultCommandTimeout).
	CommandTimeout time.Duration
	// Environ is the environment notify-send and the desktop check see
	// (default os.Environ).
	Environ func() []string
	// Parallel bounds deliveries in flight (default 4).
	Parallel int
	// Claim makes deliveries claimed (a fleet node over PostgreSQL, where
	// other workers and API nodes deliver the same outbox): nil for the
	// embedded daemon, its outbox's only sender.
	Claim *Claim
}

// Claim is how a fleet node claims the notifications it delivers. Every
// node of a fleet enqueues rows (in the transactions of its own events)
// and any of them may send a due one, so a row is claimed first — one
// FOR UPDATE SKIP LOCKED statement (storage.ClaimNotifications) — and its
// attempt recorded only under that claim. A node sends nothing once its
// claim may have expired: each delivery is cut off at the claim's TTL less
// Margin, by the node's own clock, measured from before the claim. So two
// nodes never send one notification at once; a node that dies mid-delivery
// leaves the row to another after TTL (that one delivery may then be made
// twice, as on one machine when the daemon dies between a delivery and its
// record).
type Claim struct {
	Owner string // the node's stable id (a worker's --worker-id)
	// TTL is how long a claim lasts (default: CommandTimeout plus a
	// minute, and at least MinClaimTTL, so that the longest delivery fits
	// with room to spare). The daemon refuses one below MinClaimTTL.
	TTL time.Duration
	// Margin is how long before its claim expires a delivery is cut off
	// (default TTL/4): room for clock drift and the record's commit.
	Margin time.Duration
	// Poll is how often the outbox is looked at for rows other nodes
	// enqueued (their commits do not wake this node's bus; default 2s).
	Poll time.Duration
}

// The bounds of one delivery. A fleet node's claim must outlast the
// longest of them (MinClaimTTL).
const (
	// DefaultCommandTimeout bounds notify_command unless the daemon sets
	// another (loopd --notify-command-timeout).
	DefaultCommandTimeout = time.Minute
	// WebhookTimeout bounds a webhook's request, answer included.
	WebhookTimeout = 15 * time.Second
	// DesktopTimeout bounds notify-send.
	DesktopTimeout = 10 * time.Second
)

// MinClaimTTL is the shortest claim TTL a fleet node may use with
// notify commands bounded by commandTimeout: a delivery is cut off a
// quarter of the TTL before its claim expires (the default Margin), and
// the longest delivery — the command's timeout, or a webhook's — must
// fit whole before that. A shorter claim would stop every delivery that
// takes its full time at the cut-off, unrecorded, to be claimed and cut
// off again: never delivered, and the receiver handed the same message
// at every claim.
func MinClaimTTL(commandTimeout time.Duration) time.Duration {
	if commandTimeout <= 0 {
		commandTimeout = DefaultCommandTimeout
	}
	longest := max(commandTimeout, WebhookTimeout, DesktopTimeout)
	return (4*longest + 2) / 3 // TTL − TTL/4 ≥ longest, rounded up
}

// Notifier delivers the notification outbox. Create it with New, install
// Hook on the store before any write, and run Run.
type Notifier struct {
	opts Options
	log  *zap.Logger

	mu       sync.Mutex
	inflight map[int64]bool
	done     chan struct{} // a delivery ended: look again

	// enqueued is the newest event seq the Hook enqueued rows for. The
	// outbox is read again on a commit only when that seq may have
	// committed since the last read (rows commit with their event, and
	// the bus publishes a seq after its commit), not on every step's
	// commit.
	enqueued atomic.Int64
}

// New returns a Notifier with opts' defaults filled in.
func New(opts Options) *Notifier {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 2 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Minute
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 10
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: WebhookTimeout}
	}
	if opts.CommandTimeout <= 0 {
		opts.CommandTimeout = DefaultCommandTimeout
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if c := opts.Claim; c != nil {
		cc := *c
		if cc.TTL <= 0 {
			cc.TTL = max(opts.CommandTimeout+time.Minute, MinClaimTTL(opts.CommandTimeout))
		}
		if cc.Margin <= 0 || cc.Margin >= cc.TTL {
			cc.Margin = cc.TTL / 4
		}
		if cc.Poll <= 0 {
			cc.Poll = 2 * time.Second
		}
		opts.Claim = &cc
	}
	return &Notifier{opts: opts, log: opts.Logger.Named("notify"), inflight: map[int64]bool{}, done: make(chan struct{}, 1)}
}

// Hook is the storage.EventHook that fills the outbox: for an event that
// reports a notifiable change (terminal, WAITING, PAUSED) of a run whose
// frozen config has a channel and lists the change in notify_on, it
// enqueues one row per channel in the event's own transaction. A run that
// goes WAITING again with no step succeeding since its last wait is the
// same wait, and notifies once.
func (n *Notifier) Hook(tx *storage.Tx, ev storage.Event) error {
	status, ok := statusOf(ev.Type)
	change := string(status)
	if task := taskChange(ev.Type); task != "" {
		change, ok = task, true
	}
	if !ok || ev.RunID == "" {
		return nil
	}
	raw, err := tx.RunConfig(ev.RunID)
	if err != nil {
		return err
	}
	var cfg config.Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		// A config this binary cannot read must not fail the state change.
		n.log.Warn("run config unreadable; no notification", zap.String("run", ev.RunID), zap.Error(err))
		return nil
	}
	if !cfg.Notifying() || !cfg.Notifies(change) {
		return nil
	}
	if ev.Type == events.RunWaiting {
		// One notification per wait: the model API failing at each
		// back-off retry must not page the user every few minutes.
		again, err := tx.WaitingAgain(ev.RunID, ev.Seq)
		if err != nil || again {
			return err
		}
	}
	for _, ch := range channels(cfg) {
		if err := tx.EnqueueNotification(ev.RunID, ev.Seq, string(ev.Type), ch); err != nil {
			return err
		}
	}
	for {
		cur := n.enqueued.Load()
		if ev.Seq <= cur || n.enqueued.CompareAndSwap(cur, ev.Seq) {
			return nil
		}
	}
}

// channels lists the configured channels.
func channels(cfg config.Config) []string {
	var out []string
	if cfg.NotifyCommand != "" {
		out = append(out, ChannelCommand)
	}
	if cfg.NotifyWebhook != "" {
		out = append(out, ChannelWebhook)
	}
	if cfg.NotifyDesktop {
		out = append(out, ChannelDesktop)
	}
	return out
}

// batch is how many pending rows one look at the outbox reads.
const batch = 64

// Run delivers due notifications until ctx is done or the bus closes. It
// waits for every delivery it started before returning; a delivery cut
// short by ctx is not recorded, so it is due again after a restart.
func (n *Notifier) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	after := n.opts.Bus.Seq() // every event up to here has committed
	read := true              // read the outbox: at start, when due, after a delivery
	var wake time.Time
	for {
		if e := n.enqueued.Load(); read || e > 0 && e <= after {
			if e > 0 && e <= after {
				n.enqueued.CompareAndSwap(e, 0) // a newer, uncommitted enqueue stays
			}
			wake = n.startDue(ctx, &wg)
		}
		var woken atomic.Bool // by a timer or a delivery, not by a commit
		waitCtx, stop := context.WithCancel(ctx)
		var timer *time.Timer
		if !wake.IsZero() {
			timer = time.AfterFunc(max(time.Until(wake), 0), func() { woken.Store(true); stop() })
		}
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-n.done:
				woken.Store(true)
				stop()
			case <-waitCtx.Done():
			}
		}()
		seq, err := n.opts.Bus.Wait(waitCtx, after)
		stop()
		// Join the watcher before reading woken: when a commit ends the
		// wait and a delivery's token arrives at the same moment, the
		// watcher may take the token after the wait returned, and a token
		// taken but not seen would leave a retry unscheduled until some
		// other commit. A timer that could not be stopped has fired, or is
		// firing: its time has come either way.
		<-watched
		fired := timer != nil && !timer.Stop()
		after = max(after, seq)
		read = woken.Load() || fired
		if errors.Is(err, events.ErrClosed) || ctx.Err() != nil {
			return nil
		}
	}
}

// startDue starts the due rows that are not in flight, as far as the
// parallelism allows, and returns when to look again (zero: when woken).
func (n *Notifier) startDue(ctx context.Context, wg *sync.WaitGroup) time.Time {
	now := n.opts.Now()
	// The outbox is read under the lock a delivery takes to leave
	// inflight, and a delivery leaves only after its attempt is committed.
	// Read first and lock after, and a delivery could commit and leave in
	// between: its row, still pending in what was read, would be sent a
	// second time (seen as a webhook posted twice, the second attempt's
	// record refused as a conflict).
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.opts.Claim != nil {
		return n.startClaimed(ctx, wg, now)
	}
	pending, err := n.opts.Store.PendingNotifications(ctx, batch)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("read the notification outbox", zap.Error(err))
		}
		return now.Add(time.Second)
	}
	var next time.Time
	for _, row := range pending {
		if n.inflight[row.ID] {
			continue
		}
		due := time.UnixMilli(row.NextAt)
		if due.After(now) || len(n.inflight) >= n.opts.Parallel {
			t := due
			if t.Before(now) {
				t = now
			}
			if next.IsZero() || t.Before(next) {
				next = t
			}
			if len(n.inflight) >= n.opts.Parallel {
				return time.Time{} // a delivery ending wakes us
			}
			continue
		}
		n.start(ctx, wg, row)
	}
	if len(pending) == batch && next.IsZero() {
		next = now.Add(100 * time.Millisecond) // more rows than one batch
	}
	return next
}

// start delivers row in the background; n.mu is held.
func (n *Notifier) start(ctx context.Context, wg *sync.WaitGroup, row storage.Notification) {
	n.inflight[row.ID] = true
	wg.Go(func() {
		n.deliver(ctx, row)
		n.mu.Lock()
		delete(n.inflight, row.ID)
		n.mu.Unlock()
		select {
		case n.done <- struct{}{}:
		default:
		}
	})
}

// startClaimed is startDue for a fleet node: it claims as many due rows
// as it has free slots and delivers each under its claim, with a deadline
// before the claim can expire. n.mu is held. Rows other nodes enqueue do
// not wake this node, so it looks again at least every Poll.
func (n *Notifier) startClaimed(ctx context.Context, wg *sync.WaitGroup, now time.Time) time.Time {
	c := n.opts.Claim
	next := now.Add(c.Poll)
	free := n.opts.Parallel - len(n.inflight)
	if free <= 0 {
		return time.Time{} // a delivery ending wakes us
	}
	// The deadline is taken before the claim: the claim's expiry is on the
	// database's clock, from a moment after this one.
	deadline := time.Now().Add(c.TTL - c.Margin)
	rows, err := n.opts.Store.ClaimNotifications(ctx, c.Owner, c.TTL, now.UnixMilli(), free)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("claim notifications", zap.String("problem", storage.Explain(err)))
		}
		return now.Add(time.Second)
	}
	for _, row := range rows {
		if n.inflight[row.ID] {
			// Cannot be: a row in flight here is claimed by this node
			// until its record. Never send it twice.
			continue
		}
		dctx, cancel := context.WithDeadline(ctx, deadline)
		n.inflight[row.ID] = true
		wg.Go(func() {
			defer cancel()
			n.deliver(dctx, row)
			n.mu.Lock()
			delete(n.inflight, row.ID)
			n.mu.Unlock()
			select {
			case n.done <- struct{}{}:
			default:
			}
		})
	}
	if len(rows) == free {
		return time.Time{} // maybe more due: a delivery ending wakes us
	}
	if at, err := n.opts.Store.NextNotificationAt(ctx); err == nil && at > 0 {
		if due := time.UnixMilli(at); due.Before(next) {
			next = due
			if next.Before(now) {
				next = now
			}
		}
	}
	return next
}

// deliver makes one attempt at a row and records it.
func (n *Notifier) deliver(ctx context.Context, row storage.Notification) {
	log := n.log.With(zap.String("run", row.RunID), zap.Int64("event_seq", row.EventSeq), zap.String("channel", row.Channel))
	attempt := row.Attempts + 1
	m, cfg, err := n.message(ctx, row)
	if err == nil {
		switch row.Channel {
		case ChannelCommand:
			err = runCommand(ctx, cfg.NotifyCommand, n.opts.CommandTimeout, m)
		case ChannelWebhook:
			err = postWebhook(ctx, n.opts.HTTPClient, cfg.NotifyWebhook, m)
		case ChannelDesktop:
			err = notifySend(ctx, n.opts.Environ(), m)
		default:
			err = &attemptError{msg: "unknown channel " + row.Channel}
		}
	}
	if err != nil && ctx.Err() != nil {
		// Cut short by the shutdown: the row stays due for the next
		// daemon. A delivery that succeeded is recorded all the same (the
		// store outlives Run), or the next daemon would send it again.
		// (A fleet node's delivery cut off at its claim's deadline is the
		// same: another node, or this one, claims it again once the claim
		// expires.)
		if n.opts.Claim != nil && ctx.Err() == context.DeadlineExceeded {
			log.Warn("notification delivery cut off before its claim expires; it is sent again later", zap.Error(err))
		}
		return
	}
	payload := map[string]any{"run_id": row.RunID, "channel": row.Channel, "event": row.EventType,
		"event_seq": row.EventSeq, "attempt": attempt}
	state, nextAt, typ, lastErr := storage.NotificationSent, n.opts.Now().UnixMilli(), events.NotificationSent, ""
	if err != nil {
		lastErr = err.Error()
		var ae *attemptError
		retry := errors.As(err, &ae) && ae.retry && attempt < n.opts.MaxAttempts
		if ae != nil && ae.code != 0 {
			payload["status_code"] = ae.code
		}
		typ, payload["error"], payload["final"] = events.NotificationFailed, lastErr, !retry
		state = storage.NotificationFailed
		if retry {
			state = storage.NotificationPending
			nextAt = n.opts.Now().Add(n.backoff(attempt)).UnixMilli()
			payload["retry_at"] = api.Millis(nextAt)
		}
	}
	err = n.opts.Store.Write(context.WithoutCancel(ctx), func(tx *storage.Tx) error {
		if err := tx.RecordNotificationAttempt(row, attempt, state, nextAt, lastErr); err != nil {
			return err
		}
		_, err := tx.Event(row.RunID, nil, typ, payload)
		return err
	})
	switch {
	case err != nil:
		log.Error("record notification attempt", zap.Error(err))
	case typ == events.NotificationSent:
		log.Info("notification sent", zap.Int("attempt", attempt))
	default:
		log.Warn("notification failed", zap.Int("attempt", attempt), zap.String("error", lastErr), zap.Bool("final", state != storage.NotificationPending))
	}
}

// backoff is the delay after failed attempt number attempt (1-based).
func (n *Notifier) backoff(attempt int) time.Duration {
	d := n.opts.Backoff
	for range attempt - 1 {
		if d >= n.opts.MaxBackoff/2 {
			return n.opts.MaxBackoff
		}
		d *= 2
	}
	return min(d, n.opts.MaxBackoff)
}

// message builds a row's message and reads its run's frozen config.
func (n *Notifier) message(ctx context.Context, row storage.Notification) (Message, config.Config, error) {
	var cfg config.Config
	ev, err := n.opts.Store.EventBySeq(ctx, row.EventSeq)
	if err != nil {
		return Message{}, cfg, &attemptError{msg: "read event: " + err.Error()}
	}
	run, err := n.opts.Store.Run(ctx, row.RunID)
	if err != nil {
		return Message{}, cfg, &attemptError{msg: "read run: " + err.Error()}
	}
	if err := json.Unmarshal([]byte(run.Config), &cfg); err != nil {
		return Message{}, cfg, &attemptError{msg: "read run config: " + err.Error()}
	}
	view, err := n.opts.Describe(ctx, run)
	if err != nil {
		return Message{}, cfg, &attemptError{msg: "describe run: " + err.Error()}
	}
	wire := api.Event{Seq: ev.Seq, RunID: ev.RunID, StepID: ev.StepID, Type: string(ev.Type), TS: api.Millis(ev.TS),
		Payload: json.RawMessage(ev.Payload)}
	dashboard := n.opts.Dashboard != nil && n.opts.Dashboard()
	return newMessage(wire, view, dashboard), cfg, nil
}
