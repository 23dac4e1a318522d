package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// countingReceiver is a webhook endpoint (127.0.0.1) that counts every
// request per event seq, answered or not; the first request can be held
// without an answer until released.
type countingReceiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	bySeq   map[int64]int
	total   int
	hold    chan struct{} // the first request blocks until it is closed
	arrived chan struct{} // closed when the first request arrived
	// gaveUp is closed when the held first request's client went away
	// before it was released: that request was never answered.
	gaveUp chan struct{}
	// arrivals are when each request arrived, in order.
	arrivals []time.Time
}

func newCountingReceiver(t *testing.T, holdFirst bool) *countingReceiver {
	r := &countingReceiver{bySeq: map[int64]int{}, arrived: make(chan struct{}), gaveUp: make(chan struct{})}
	if holdFirst {
		r.hold = make(chan struct{})
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var m struct {
			Event api.Event `json:"event"`
		}
		_ = json.Unmarshal(body, &m)
		r.mu.Lock()
		first := r.total == 0
		r.total++
		r.bySeq[m.Event.Seq]++
		r.arrivals = append(r.arrivals, time.Now())
		hold := r.hold // release sets it to nil under mu
		r.mu.Unlock()
		if first {
			close(r.arrived)
			if hold != nil {
				select {
				case <-hold:
				case <-req.Context().Done():
					close(r.gaveUp)
					return
				}
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	t.Cleanup(r.release)
	return r
}

func (r *countingReceiver) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hold != nil {
		close(r.hold)
		r.hold = nil
	}
}

// arrivedAt is when each request arrived, in order.
func (r *countingReceiver) arrivedAt() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.arrivals)
}

func (r *countingReceiver) counts() (map[int64]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int64]int, len(r.bySeq))
	for k, v := range r.bySeq {
		out[k] = v
	}
	return out, r.total
}

// notifyingRun starts, on worker i of f, a run that completes at its first
// iteration and notifies url when it ends.
func (f *fleet) notifyingRun(i int, url string) string {
	f.t.Helper()
	return f.quickRun(i, "notify_webhook="+url, "notify_on=ended")
}

// quickRun starts, on worker i of f, a run that completes at its first
// iteration, with more config lines.
func (f *fleet) quickRun(i int, lines ...string) string {
	f.t.Helper()
	e := f.workers[i]
	ws := filepath.Join(f.t.TempDir(), "ws")
	for _, d := range []string{ws, filepath.Join(ws, ".loop")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, ".loop", "config"), []byte("agent=command\nagent_command="+scriptedAgent()+
		"\nmax_iterations=3\n"+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("FAKE_DONE_AT=1\n"), 0o600); err != nil {
		f.t.Fatal(err)
	}
	id := e.start("-C", ws, "goal")
	f.ws[id] = ws
	return id
}

// A notification due in a fleet is sent once: worker 1's delivery of a
// run's end is in flight (the receiver holds it, unrecorded) while worker
// 2 and an API node start, read the outbox, and two more runs end and are
// notified — the nodes poll the outbox every 2 s meanwhile — yet none of
// them sends the first one, claimed by worker 1. Released, worker 1
// records its delivery: one request and one NOTIFICATION_SENT per run.
func TestFleetNotificationSentOnceAcrossWorkers(t *testing.T) {
	f := newFleet(t, 3)
	rcv := newCountingReceiver(t, true)
	f.start(1)
	first := f.notifyingRun(1, rcv.srv.URL)
	select {
	case <-rcv.arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the first run's notification never arrived")
	}
	f.start(2)
	// An API node too: it delivers the outbox as the workers do.
	f.workers[0].startAPINode(f.url)
	second := f.notifyingRun(2, rcv.srv.URL)
	eventually(t, "the second run's notification", 60*time.Second, func() bool {
		_, total := rcv.counts()
		return total >= 2 && len(eventsOfType(f.workers[2].events(second), "NOTIFICATION_SENT")) == 1
	})
	// A few claim polls of both other nodes (every 2 s) while the first
	// delivery is still held: marked by a third run's notification sent
	// after them.
	third := f.notifyingRun(2, rcv.srv.URL)
	eventually(t, "the third run's notification", 60*time.Second, func() bool {
		return len(eventsOfType(f.workers[2].events(third), "NOTIFICATION_SENT")) == 1
	})
	rcv.release()
	eventually(t, "the first delivery to be recorded", 30*time.Second, func() bool {
		return len(eventsOfType(f.workers[1].events(first), "NOTIFICATION_SENT")) == 1
	})
	bySeq, total := rcv.counts()
	if total != 3 {
		t.Errorf("the receiver got %d requests, want 3 (one per run): %v", total, bySeq)
	}
	for seq, n := range bySeq {
		if n != 1 {
			t.Errorf("event %d's notification was sent %d times", seq, n)
		}
	}
	for _, id := range []string{first, second, third} {
		evs := f.workers[1].events(id)
		if n, failed := len(eventsOfType(evs, "NOTIFICATION_SENT")), len(eventsOfType(evs, "NOTIFICATION_FAILED")); n != 1 || failed != 0 {
			t.Errorf("run %s: %d NOTIFICATION_SENT and %d NOTIFICATION_FAILED, want 1 and 0", id, n, failed)
		}
	}
	for i := 1; i <= 2; i++ {
		if log := f.workers[i].daemonLog(); strings.Contains(log, "record notification attempt") {
			t.Errorf("worker %d could not record an attempt (sent twice?):\n%s", i, log)
		}
	}
}

// fleetNotifyClaim is the notification claim of TestFleetNotification-
// OfAFrozenNode: the shortest loopd accepts with a 5 s notify command
// timeout, 4/3 of a webhook's 15 s.
const fleetNotifyClaim = 20 * time.Second

// A node frozen (SIGSTOP) in the middle of a delivery leaves the
// notification to another node once its claim expires: worker 1 claims
// the run's end and posts it, the receiver holds that request, worker 1
// is frozen; worker 2, started after, sends it after the claim expired
// and records it. Worker 1, woken, is past its cut-off (the claim's TTL
// less a quarter, by its own clock): its request is given up unanswered
// and nothing of it recorded. One NOTIFICATION_SENT, the receiver's only
// answered request is worker 2's, and a claim below the minimum is
// refused.
func TestFleetNotificationOfAFrozenNode(t *testing.T) {
	f := newFleet(t, 3)
	rcv := newCountingReceiver(t, true)
	claimFlags := []string{"--notify-command-timeout", "5s", "--notify-claim-ttl", fleetNotifyClaim.String()}
	f.start(1, claimFlags...)
	id := f.notifyingRun(1, rcv.srv.URL)
	select {
	case <-rcv.arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the run's notification never arrived")
	}
	victim := f.workers[1].daemon.Process
	if err := victim.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.Signal(syscall.SIGCONT) })
	f.start(2, claimFlags...)
	eventually(t, "worker 2 to deliver the notification", fleetNotifyClaim+30*time.Second, func() bool {
		_, total := rcv.counts()
		return total >= 2 && len(eventsOfType(f.workers[2].events(id), "NOTIFICATION_SENT")) == 1
	})
	at := rcv.arrivedAt()
	if gap := at[1].Sub(at[0]); gap < fleetNotifyClaim-2*time.Second {
		t.Errorf("worker 2 posted %s after worker 1, before worker 1's claim (%s) could expire", gap, fleetNotifyClaim)
	}
	select {
	case <-rcv.gaveUp:
		t.Fatal("worker 1's held request was given up while worker 1 was frozen")
	default:
	}
	if err := victim.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rcv.gaveUp:
	case <-time.After(30 * time.Second):
		t.Fatal("worker 1, woken past its cut-off, did not give its held request up")
	}
	eventually(t, "worker 1 to log its delivery cut off", 30*time.Second, func() bool {
		return strings.Contains(f.workers[1].daemonLog(), "notification delivery cut off before its claim expires")
	})
	// Its delivery has returned (the log line): the counts are final, as
	// the row is sent and no node claims it again.
	bySeq, total := rcv.counts()
	if total != 2 {
		t.Errorf("the receiver got %d requests, want 2 (worker 1's, never answered, and worker 2's): %v", total, bySeq)
	}
	evs := f.workers[2].events(id)
	sent, failed := eventsOfType(evs, "NOTIFICATION_SENT"), eventsOfType(evs, "NOTIFICATION_FAILED")
	if len(sent) != 1 || len(failed) != 0 {
		t.Fatalf("%d NOTIFICATION_SENT and %d NOTIFICATION_FAILED, want 1 and 0", len(sent), len(failed))
	}
	db, err := sql.Open("pgx", f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var state, owner string
	var attempts int
	var epoch int64
	if err := db.QueryRowContext(t.Context(), `SELECT state, attempts, claim_owner, claim_epoch FROM notifications WHERE run_id = $1`, id).
		Scan(&state, &attempts, &owner, &epoch); err != nil {
		t.Fatal(err)
	}
	if state != "sent" || attempts != 1 || owner != "" || epoch != 2 {
		t.Errorf("the notification is %s after %d attempt(s), claimed by %q at epoch %d; want sent after 1, released, at epoch 2 (worker 1's claim, then worker 2's)",
			state, attempts, owner, epoch)
	}
	if log := f.workers[1].daemonLog(); strings.Contains(log, "notification sent") || strings.Contains(log, "record notification attempt") {
		t.Errorf("worker 1 recorded (or tried to record) its late delivery:\n%s", log)
	}
	t.Logf("worker 2 posted %s after frozen worker 1's request (claim %s)", at[1].Sub(at[0]).Round(time.Millisecond), fleetNotifyClaim)

	// A claim too short for the longest delivery is refused, naming it.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--notify-claim-ttl", "19s", "--notify-command-timeout", "5s"}, "--notify-claim-ttl must be at least 20s"},
		{[]string{"--notify-claim-ttl", "1m"}, "--notify-claim-ttl must be at least 1m20s"},
	} {
		e := f.workers[0]
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "loopd"), append([]string{"--store", f.url}, c.args...)...)
		cmd.Env = e.environ()
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 64 || !strings.Contains(string(out), c.want) {
			t.Errorf("loopd %v = %v\n%s; want exit 64 saying %q", c.args, err, out, c.want)
		}
	}
}

// latePush runs a fleet run from git on worker 1 until the ledger commit
// of its iteration 2, holds worker 1 at stage ("check": before its lease
// check; "push": after it, right before the push), freezes it (SIGSTOP)
// until worker 2 has taken the run over and redone iteration 2 up to its
// own push (held there), then lets worker 1 go on. It returns the fleet,
// the run, the remote, the base commit, the hold directory and the
// branch's commit before worker 1 went on (iteration 1's).
func latePush(t *testing.T, stage string) (f *fleet, id, remote, base, holds, before string) {
	f = newFleet(t, 3)
	holds = t.TempDir()
	for _, w := range f.workers[1:] {
		w.daemonEnv = append(w.daemonEnv, "LOOPD_TEST_HOLD_BEFORE_PUSH="+holds)
	}
	id, remote, base = f.gitFleetRun("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=2", "FAKE_DONE_AT=3")
	f.start(1)
	wt1 := filepath.Join(f.workers[1].home, "worktrees", id)
	eventually(t, "iteration 2's agent to start on worker 1", 60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(wt1, ".agent-invocations"))
		return strings.Contains("\n"+string(b), "\n2 ")
	})
	branch := "refs/heads/loop/" + id[:8]
	before = gitIn(t, remote, "rev-parse", branch)
	hold := func(w int, stage string) string {
		p := filepath.Join(holds, "hold-"+f.ids[w]+"-"+stage)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	held := func(w int, stage string) bool {
		m, _ := filepath.Glob(filepath.Join(holds, "held-"+f.ids[w]+"-"+stage+"-*"))
		return len(m) > 0
	}
	hold1 := hold(1, stage)
	if err := os.WriteFile(filepath.Join(wt1, "go-2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "worker 1 to be held before its push", 60*time.Second, func() bool { return held(1, stage) })
	victim := f.workers[1].daemon.Process
	if err := victim.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.Signal(syscall.SIGCONT) })
	hold2 := hold(2, "push")
	f.start(2)
	wt2 := filepath.Join(f.workers[2].home, "worktrees", id)
	eventually(t, "worker 2 to take the run over and start iteration 2", fleetTTL+fleetScan+60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(wt2, ".agent-invocations"))
		return strings.Contains("\n"+string(b), "\n2 ")
	})
	if err := os.WriteFile(filepath.Join(wt2, "go-2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "worker 2 to be held before its push", 60*time.Second, func() bool { return held(2, "push") })
	if tip := gitIn(t, remote, "rev-parse", branch); tip != before {
		t.Fatalf("the branch moved before worker 1 went on: %s, want %s", tip, before)
	}
	if err := victim.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(hold1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(hold2) })
	return f, id, remote, base, hold2, before
}

// finishLatePush releases worker 2's push and checks the run completes
// with each iteration on its branch once, and none of worker 1's.
func finishLatePush(t *testing.T, f *fleet, id, remote, base, hold2 string) {
	if err := os.Remove(hold2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to end", 90*time.Second, func() bool { return f.workers[0].status(id).Status.Terminal() })
	r := f.workers[0].status(id)
	if r.Status != api.RunCompleted {
		t.Fatalf("run %s ended %s %s: %s; want COMPLETED (a stale worker must not end it)", id, r.Status, r.Reason, r.Description)
	}
	short := id[:8]
	branch := "refs/heads/loop/" + short
	out, err := exec.Command("git", "-C", remote, "log", "--format=%s%x09%(trailers:key=Loop-Lease,valueonly,separator=)", base+".."+branch).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(string(out))
	want := fmt.Sprintf("loop %s: iteration 3\t2\nloop %s: iteration 2\t2\nloop %s: iteration 1\t1", short, short, short)
	if got != want {
		t.Fatalf("the final branch (subject, lease epoch):\n%s\nwant each iteration once, 2 and 3 from the new owner:\n%s", got, want)
	}
}

// A worker frozen right after its lease check, before its push, pushes
// its iteration late — after another worker took the run over and before
// that one pushed. The owner's push is refused by its lease, finds ledger
// commits of the run from an older epoch, sets the branch back and pushes:
// the run completes, the stale commit is not on the branch.
func TestFleetLatePushCannotKillTheRun(t *testing.T) {
	f, id, remote, base, hold2, before := latePush(t, "push")
	branch := "refs/heads/loop/" + id[:8]
	var stale string
	eventually(t, "worker 1's late push to land", 30*time.Second, func() bool {
		stale = gitIn(t, remote, "rev-parse", branch)
		return stale != before
	})
	if msg := gitIn(t, remote, "log", "-1", "--format=%B", stale); !strings.Contains(msg, "Loop-Lease: 1") {
		t.Fatalf("the late push's commit carries no epoch-1 trailer:\n%s", msg)
	}
	finishLatePush(t, f, id, remote, base, hold2)
	if exec.Command("git", "-C", remote, "merge-base", "--is-ancestor", stale, branch).Run() == nil {
		t.Fatalf("the stale commit %s is on the final branch", stale)
	}
	if log := f.workers[2].daemonLog(); !strings.Contains(log, "run branch set back: a worker that lost the run pushed to it late") {
		t.Errorf("worker 2's log does not say it set the branch back:\n%s", log)
	}
}

// A worker frozen before its lease check pushes nothing once it goes on:
// it finds the run is no longer its own.
func TestFleetWorkerThatLostItsRunDoesNotPush(t *testing.T) {
	f, id, remote, base, hold2, before := latePush(t, "check")
	eventually(t, "worker 1 to skip its push", 30*time.Second, func() bool {
		return strings.Contains(f.workers[1].daemonLog(), "run branch not pushed")
	})
	if tip := gitIn(t, remote, "rev-parse", "refs/heads/loop/"+id[:8]); tip != before {
		t.Fatalf("worker 1 pushed after it lost the run: the branch is at %s, was %s", tip, before)
	}
	finishLatePush(t, f, id, remote, base, hold2)
	if log := f.workers[2].daemonLog(); strings.Contains(log, "set back") {
		t.Errorf("worker 2 had something to set back:\n%s", log)
	}
}

// withPassword puts a password into a store URL (the throwaway cluster
// trusts local connections and never asks for it, so it must only never
// be shown).
func withPassword(t *testing.T, store, pw string) string {
	u, err := neturl.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(u.User.Username(), pw)
	return u.String()
}

// A worker configured by daemon.conf alone — store, worker_id and the
// lease settings — runs as the flags would make it, and shows its store
// without the password (daemon status, text and JSON, and its log); a
// flag wins over the file; a bad fleet key is refused naming file, line
// and key, and nothing starts.
func TestFleetDaemonConfKeys(t *testing.T) {
	f := newFleet(t, 1)
	const pw = "pw-n0t-for-l0gs"
	store := withPassword(t, f.url, pw)
	e := f.workers[0]
	e.writeDaemonConf(0o600,
		"store = "+store,
		"worker_id = conf-worker",
		"lease_ttl = 15s",
		"heartbeat = 2s",
		"fence_margin = 5s",
		"drain_timeout = 30s")
	e.startDaemon()
	info := e.daemonInfo()
	if info.Worker != "conf-worker" {
		t.Fatalf("daemon status: worker %q; want the worker conf-worker of daemon.conf", info.Worker)
	}
	if !strings.HasPrefix(info.Store, "postgres://") || !strings.Contains(info.Store, "xxxxx") {
		t.Errorf("daemon status store = %q, want the URL with its password hidden", info.Store)
	}
	id := f.notifyingRun(0, "http://127.0.0.1:1/unused")
	eventually(t, "the run to end on the worker of daemon.conf", 60*time.Second, func() bool { return e.status(id).Status.Terminal() })
	if r := e.status(id); r.Worker != "conf-worker" {
		t.Errorf("run %s ran on %q, want conf-worker", id, r.Worker)
	}
	for what, out := range map[string]string{
		"daemon status":        e.must("daemon", "status"),
		"daemon status --json": e.must("daemon", "status", "--json"),
		"the daemon's log":     e.daemonLog(),
	} {
		if strings.Contains(out, pw) {
			t.Errorf("%s shows the store's password:\n%s", what, out)
		}
	}
	e.must("daemon", "stop")
	<-e.exited

	// A flag wins over the file.
	e.startDaemon("--worker-id", "flag-worker")
	if got := e.daemonInfo().Worker; got != "flag-worker" {
		t.Errorf("with --worker-id the worker is %q, want flag-worker", got)
	}
	e.must("daemon", "stop")
	<-e.exited

	// Bad values: exit 64, file:line: key named, the password never quoted.
	for _, c := range []struct {
		lines []string
		args  []string
		want  string
	}{
		{[]string{"store = " + store, "lease_ttl = 10s", "fence_margin = 12s"}, nil, "daemon.conf:3: fence_margin: must be less than the lease TTL"},
		{[]string{"store = mysql://root:" + pw + "@db/x"}, nil, "daemon.conf:1: store: must be a PostgreSQL URL"},
		{[]string{"lease_ttl = 20s"}, nil, "daemon.conf:1: lease_ttl need --store"},
		// The file's margin against the flag's TTL: the file's line named.
		{[]string{"store = " + store, "fence_margin = 8s"}, []string{"--lease-ttl", "8s"}, "daemon.conf:2: fence_margin must be more than 0 and less than the lease TTL (8s)"},
	} {
		e.writeDaemonConf(0o600, c.lines...)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "loopd"), c.args...)
		cmd.Env = e.environ()
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 64 || !strings.Contains(string(out), c.want) {
			t.Errorf("loopd with daemon.conf %q = %v\n%s; want exit 64 saying %q", c.lines, err, out, c.want)
		}
		if strings.Contains(string(out), pw) {
			t.Errorf("loopd's refusal quotes the password:\n%s", out)
		}
	}
}

// A worker that ends a run and dies (kill -9) while the run's
// postmortem_command runs leaves it to another worker: once the claim
// expired, a second worker takes the postmortem over, writes the report
// on its own disk for the command and runs the command — the report is
// recorded once (one POSTMORTEM_WRITTEN), and the claim is released.
func TestFleetPostmortemOfALostWorkerIsTakenOver(t *testing.T) {
	f := newFleet(t, 3)
	shared := t.TempDir()
	log, gate := filepath.Join(shared, "ran"), filepath.Join(shared, "go")
	f.start(1)
	id := f.quickRun(1, "postmortem_timeout=5s",
		`postmortem_command=echo "$LOOP_POSTMORTEM" >> `+log+`; while [ ! -f `+gate+` ]; do sleep 0.1; done`)
	lines := func() []string {
		b, _ := os.ReadFile(log)
		return strings.Fields(string(b))
	}
	eventually(t, "worker 1 to run the postmortem command", 60*time.Second, func() bool { return len(lines()) == 1 })
	f.workers[1].killDaemon()
	f.start(2)
	// The claim lasts postmortem_timeout + TTL from worker 1's claim; the
	// next scan of worker 2 after that takes it.
	eventually(t, "worker 2 to run the command again", 5*time.Second+fleetTTL+fleetScan+30*time.Second, func() bool { return len(lines()) == 2 })
	got := lines()
	if !strings.HasPrefix(got[0], f.workers[1].home) || !strings.HasPrefix(got[1], f.workers[2].home) {
		t.Fatalf("the command ran with the reports %v; want worker 1's, then worker 2's", got)
	}
	if _, err := os.Stat(got[1]); err != nil {
		t.Fatalf("worker 2's report for the command: %v", err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	eventually(t, "worker 2 to release the postmortem", 30*time.Second, func() bool {
		var owner string
		return db.QueryRowContext(t.Context(), `SELECT postmortem_owner FROM runs WHERE id = $1`, id).Scan(&owner) == nil && owner == ""
	})
	if n := countType(f.workers[2].events(id), "POSTMORTEM_WRITTEN"); n != 1 {
		t.Fatalf("%d POSTMORTEM_WRITTEN events, want 1", n)
	}
	if n := strings.Count(f.workers[2].daemonLog(), "taking over a run's postmortem"); n != 1 {
		t.Fatalf("worker 2 took the postmortem over %d times, want 1", n)
	}
}
