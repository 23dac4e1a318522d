package storage

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// The checkpointer moves committed pages from the WAL into the database
// file, on a connection of its own. SQLite's default does it inside the
// commit that fills the WAL past 1,000 pages, and a checkpoint fsyncs:
// on a slow disk that stalled one step's commit for 100-200 ms about every
// 100 steps. The writer's automatic checkpoints are off (wal_autocheckpoint
// 0 in its DSN) and this goroutine runs passive checkpoints instead, which
// never block the writer or readers. A crash at any moment loses nothing:
// until a page is checkpointed, the WAL holds it.
type checkpointer struct {
	db    *sqlx.DB // one connection, not query_only
	every int      // commits between checkpoints
	each  time.Duration

	mu      sync.Mutex
	commits int
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

const (
	checkpointEvery  = 200             // commits; ~1,600 pages at a step's usual 6-10
	checkpointPeriod = 2 * time.Second // at most this long between checkpoints while commits happen
)

func newCheckpointer(path, dsn string, every int, each time.Duration) (*checkpointer, error) {
	db, err := sqlx.Open(driverName, path+"?"+dsn)
	if err != nil {
		return nil, fmt.Errorf("open db checkpointer: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	c := &checkpointer{db: db, every: every, each: each,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

// committed counts a commit and wakes the checkpointer every c.every.
func (c *checkpointer) committed() {
	c.mu.Lock()
	c.commits++
	due := c.commits >= c.every
	c.mu.Unlock()
	if due {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	t := time.NewTicker(c.each)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		case <-t.C:
		}
		c.mu.Lock()
		n := c.commits
		c.commits = 0
		c.mu.Unlock()
		if n == 0 {
			continue
		}
		// A failure (the disk full, a reader holding old frames) leaves
		// the pages in the WAL, where they are safe; the next round
		// tries again.
		_, _ = c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
	}
}

func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.db.Close()
}
