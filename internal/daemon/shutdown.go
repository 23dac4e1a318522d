package daemon

import (
	"github.com/loopd/loopd/internal/api"
)

// shuttingDown reports whether the daemon has begun to shut down.
func (d *Daemon) shuttingDown() bool {
	select {
	case <-d.closing:
		return true
	default:
		return false
	}
}

// failure is the API error of a daemon-side failure err: internal, unless
// the daemon is shutting down. A request still in flight then fails
// because of the shutdown (its work canceled, the database closed under
// it: "context canceled", "sql: statement is closed"), and the client
// must hear "unavailable, run it again" (shutting_down, loopctl exit 69),
// as after a crash, not an internal error (70).
func (d *Daemon) failure(err error) *api.Error {
	if d.shuttingDown() {
		return api.Errorf(api.CodeShutdown, "loopd is shutting down and did not finish the request (%v); run the command again", err)
	}
	return api.Errorf(api.CodeInternal, "%v", err)
}
