package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/loopd/loopd/internal/fleet"
	"github.com/loopd/loopd/internal/notify"
	"github.com/loopd/loopd/internal/storage"
)

// fleetFlags are loopd's flags for a fleet over PostgreSQL (docs/fleet.md).
type fleetFlags struct {
	store        *string
	worker       *bool
	workerID     *string
	leaseTTL     *time.Duration
	heartbeat    *time.Duration
	fenceMargin  *time.Duration
	drainTimeout *time.Duration
	notifyClaim  *time.Duration
}

func addFleetFlags(fs *flag.FlagSet) *fleetFlags {
	return &fleetFlags{
		store: fs.String("store", env("LOOPD_STORE", ""), "a PostgreSQL URL (postgres://user@host/db): join a fleet of workers over that database instead of "+
			"LOOPD_HOME's SQLite file; see docs/fleet.md (env LOOPD_STORE)"),
		worker:       fs.Bool("worker", true, "with --store: claim and run runs; --worker=false makes an API-only node"),
		workerID:     fs.String("worker-id", "", "with --store: this worker's stable id (default: hostname:LOOPD_HOME)"),
		leaseTTL:     fs.Duration("lease-ttl", 30*time.Second, "with --store: how long a run's lease lasts without a renewal; must exceed the database's failover time"),
		heartbeat:    fs.Duration("heartbeat", 0, "with --store: how often the leases are renewed (default: a sixth of --lease-ttl)"),
		fenceMargin:  fs.Duration("fence-margin", 5*time.Second, "with --store: agents are stopped once no renewal succeeded for --lease-ttl minus this"),
		drainTimeout: fs.Duration("drain-timeout", 5*time.Minute, "with --store: on SIGTERM, how long running steps may take to finish before they are stopped and their runs handed over"),
		notifyClaim: fs.Duration("notify-claim-ttl", 0, "with --store: how long this node's claim of a notification it delivers lasts; a node lost mid-delivery leaves it to "+
			"another after this (default: --notify-command-timeout plus a minute; at least 4/3 of the longest delivery)"),
	}
}

// options checks the fleet flags and returns the daemon's fleet settings:
// nil without --store, where giving any of the others is a mistake.
// fromFile names where the flags daemon.conf set come from, by flag;
// commandTimeout is --notify-command-timeout, which the notification
// claim must outlast.
func (f *fleetFlags) options(fs *flag.FlagSet, home string, fromFile map[string]string, commandTimeout time.Duration) (*fleet.Node, error) {
	name := func(flag string) string {
		if at, ok := fromFile[flag]; ok {
			return at
		}
		return "--" + flag
	}
	if *f.store == "" {
		var given []string
		fs.Visit(func(fl *flag.Flag) {
			switch fl.Name {
			case "worker", "worker-id", "lease-ttl", "heartbeat", "fence-margin", "drain-timeout", "notify-claim-ttl":
				given = append(given, name(fl.Name))
			}
		})
		if len(given) > 0 {
			return nil, fmt.Errorf("%s need --store (or LOOPD_STORE, or store in daemon.conf): they configure a fleet worker", given[0])
		}
		return nil, nil
	}
	hb := *f.heartbeat
	if hb == 0 {
		hb = *f.leaseTTL / 6
	}
	switch {
	case *f.leaseTTL < time.Second:
		return nil, fmt.Errorf("%s must be at least 1s, got %s", name("lease-ttl"), *f.leaseTTL)
	case *f.fenceMargin <= 0 || *f.fenceMargin >= *f.leaseTTL:
		return nil, fmt.Errorf("%s must be more than 0 and less than the lease TTL (%s), got %s", name("fence-margin"), *f.leaseTTL, *f.fenceMargin)
	case hb <= 0 || 2*hb > *f.leaseTTL-*f.fenceMargin:
		// Two renewals must fit before the agents stop: one late or lost
		// renewal must not stop every agent of the worker.
		return nil, fmt.Errorf("%s must be more than 0 and at most half of the lease TTL minus the fence margin (%s), got %s",
			name("heartbeat"), (*f.leaseTTL-*f.fenceMargin)/2, hb)
	case *f.drainTimeout <= 0:
		return nil, fmt.Errorf("%s must be more than 0, got %s", name("drain-timeout"), *f.drainTimeout)
	case *f.notifyClaim != 0 && *f.notifyClaim < notify.MinClaimTTL(commandTimeout):
		// Shorter, and a delivery that takes its full time is cut off
		// unrecorded at every claim: never delivered, sent again and again.
		return nil, fmt.Errorf("%s must be at least %s: a delivery is cut off a quarter of the claim before it expires, and the longest "+
			"(a notify command's timeout, %s, or a webhook's, %s) must fit before that; got %s",
			name("notify-claim-ttl"), notify.MinClaimTTL(commandTimeout), commandTimeout, notify.WebhookTimeout, *f.notifyClaim)
	}
	id := *f.workerID
	if id == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--worker-id: no hostname to default to (%v); give one", err)
		}
		id = host + ":" + home
	}
	return &fleet.Node{Store: *f.store, Worker: *f.worker, WorkerID: id, LeaseTTL: *f.leaseTTL, Heartbeat: hb,
		FenceMargin: *f.fenceMargin, DrainTimeout: *f.drainTimeout, NotifyClaimTTL: *f.notifyClaim}, nil
}

// runMigrate is `loopd migrate --store URL`: bring a fleet's database to
// this binary's schema, then exit (workers also do it at start).
func runMigrate(args []string) int {
	fs := flag.NewFlagSet("loopd migrate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: loopd migrate --store URL\n\nApplies the schema migrations a fleet's PostgreSQL database lacks, one at a time under an advisory lock, and exits.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	store := fs.String("store", env("LOOPD_STORE", ""), "the PostgreSQL URL (env LOOPD_STORE)")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "loopd migrate: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *store == "" {
		fmt.Fprintln(os.Stderr, "loopd migrate: --store (or LOOPD_STORE) is required: the PostgreSQL URL of the fleet's database")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := storage.MigratePostgres(ctx, *store); err != nil {
		fmt.Fprintln(os.Stderr, "loopd migrate:", err)
		return exitFailure
	}
	fmt.Println("loopd migrate: " + storage.RedactStore(*store) + " is at schema version " + strconv.Itoa(storage.PostgresSchemaVersion()))
	return exitOK
}
