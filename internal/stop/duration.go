package stop

import (
	"fmt"
	"time"

	"github.com/loopd/loopd/internal/humantime"
)

// ParseDuration parses a max_duration: a Go duration ("2h30m", "1.5h") or
// a humantime one ("2h 30m", "90 sec", "1day"), as every duration in loopd's
// configuration is (package humantime).
func ParseDuration(s string) (time.Duration, error) {
	d, err := humantime.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("%w (examples: \"2h 30m\", \"90s\", \"1h30m\")", err)
	}
	return d, nil
}

// FormatDuration writes a duration in the canonical humantime form used in
// the conditions' JSON, descriptions and reasons ("2h 30m").
func FormatDuration(d time.Duration) string { return humantime.Format(d) }
