package main

import (
	"errors"
	"flag"
	"strings"

	"github.com/loopd/loopd/internal/daemon"
)

// fleetFlags are the flags of a fleet node: the shared PostgreSQL store and
// the node's roles.
type fleetFlags struct {
	store  *string
	worker *bool
}

func addFleetFlags(fs *flag.FlagSet) fleetFlags {
	return fleetFlags{
		store:  fs.String("store", env("LOOPD_STORE", ""), "the fleet's PostgreSQL database (postgres://user@host/db?…) instead of HOME/loopd.db (env LOOPD_STORE)"),
		worker: fs.Bool("worker", true, "execute runs; --worker=false makes an API-only node of a fleet (needs --store)"),
	}
}

// apply checks the fleet flags and sets them on opts.
func (f fleetFlags) apply(opts *daemon.Options) error {
	store := strings.TrimSpace(*f.store)
	switch {
	case store == "" && !*f.worker:
		return errors.New("--worker=false makes an API-only node of a fleet: it needs --store postgres://…")
	case store != "" && !strings.HasPrefix(store, "postgres://") && !strings.HasPrefix(store, "postgresql://"):
		return errors.New("--store must be a postgres:// or postgresql:// URL (a fleet's shared database)")
	case store != "" && *f.worker:
		// Workers on a shared database need leased runs, or two of them
		// would execute the same run: until then only API nodes.
		return errors.New("--store: this loopd runs only API nodes of a fleet; add --worker=false")
	}
	opts.Store, opts.APIOnly = store, !*f.worker
	return nil
}
