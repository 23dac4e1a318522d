package git

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// leaseTrailer starts the trailer line of a fleet run's ledger commit that
// names the lease epoch it was made under.
const leaseTrailer = "Loop-Lease: "

// StalePush decides whether the commits a run's branch on url has past
// pushed (the run's last recorded push; "" for none, then past base) are
// a late push of a worker that lost the run: every one of them a ledger
// commit of runID (its "Loop-Step: <runID>/…" trailer) made under a lease
// epoch older than epoch (its "Loop-Lease:" trailer), on top of pushed. A
// worker frozen between its fence check and its push can land one such
// commit after another worker took the run over; the run's owner may set
// the branch back over it. Anything else — a commit without the
// trailers, another run's, one of this epoch or newer, a branch that does
// not descend from pushed — is someone else's work: false. tip is the
// branch's commit on the remote, fetched into the mirror if missing.
func (m Mirrors) StalePush(ctx context.Context, url, tip, pushed, base, runID string, epoch int64) (bool, error) {
	if tip == "" || tip == pushed {
		return false, nil
	}
	unlock, err := m.lock(ctx, url)
	if err != nil {
		return false, err
	}
	defer unlock()
	mirror, err := m.ensure(ctx, url)
	if err != nil {
		return false, err
	}
	if !hasCommit(ctx, mirror, tip) {
		if err := fetch(ctx, mirror, url); err != nil {
			return false, err
		}
		if !hasCommit(ctx, mirror, tip) {
			return false, fmt.Errorf("commit %s of the run branch is not in %s (fetched just now)", short(tip), url)
		}
	}
	from := pushed
	if from == "" {
		from = base
	}
	c := Cmd{Dir: mirror}
	if !isAncestor(ctx, c, from, tip) {
		return false, nil
	}
	out, err := c.Run(ctx, "log", "--format=%H%x00%B%x1e", from+".."+tip)
	if err != nil {
		return false, err
	}
	n := 0
	for rec := range bytes.SplitSeq(out, []byte{0x1e}) {
		rec = bytes.TrimSpace(rec)
		if len(rec) == 0 {
			continue
		}
		_, body, _ := bytes.Cut(rec, []byte{0})
		run, e, ok := ledgerLease(body)
		if !ok || run != runID || e >= epoch {
			return false, nil
		}
		n++
	}
	return n > 0, nil
}

// ledgerLease reads the run id and lease epoch of a ledger commit's
// message; ok is false when it has not both trailers.
func ledgerLease(body []byte) (runID string, epoch int64, ok bool) {
	var haveRun, haveEpoch bool
	for l := range strings.SplitSeq(string(body), "\n") {
		if v, found := strings.CutPrefix(l, "Loop-Step: "); found {
			if id, _, cut := strings.Cut(v, "/"); cut {
				runID, haveRun = id, true
			}
		}
		if v, found := strings.CutPrefix(l, leaseTrailer); found {
			if e, err := strconv.ParseInt(v, 10, 64); err == nil && e > 0 {
				epoch, haveEpoch = e, true
			}
		}
	}
	return runID, epoch, haveRun && haveEpoch
}
