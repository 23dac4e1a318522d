package tcpguard

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// RefusalLogEvery is the least time between two log lines about refused
// requests: anyone on the machine can knock on the TCP listener (or a
// root process on the socket), and one line per knock filled 17 MB of log
// in 5 s.
const RefusalLogEvery = 10 * time.Second

// Refusals rate-limits the log of refused requests: the first is logged
// at once, then at most one line per interval, counting those not logged
// since.
type Refusals struct {
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	last       time.Time // when a line was last written; zero before the first
	suppressed int       // refusals since then not logged
}

// NewRefusals returns a log limiter that writes at most one line per
// RefusalLogEvery.
func NewRefusals() *Refusals { return &Refusals{every: RefusalLogEvery, now: time.Now} }

// Note records one refusal and logs it with fields unless a line was
// written less than every ago.
func (r *Refusals) Note(log *zap.Logger, msg string, fields ...zap.Field) {
	r.mu.Lock()
	now := r.now()
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	if n > 0 {
		fields = append(fields, zap.Int("refused_since_last_line", n), zap.Duration("log_interval", r.every))
	}
	log.Warn(msg, fields...)
}
