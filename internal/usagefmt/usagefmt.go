// Package usagefmt formats token counts and dollar costs for people, the
// one way both loopctl and the dashboard print them: a user comparing
// `loopctl status` with the run's page must read the same figures, not
// "$0.01" in one and "$0.0120" in the other.
//
// It imports only internal/api and the standard library, so loopctl can
// use it without linking the daemon's storage.
package usagefmt

import (
	"fmt"
	"math"
	"strconv"

	"github.com/loopd/loopd/internal/api"
)

// USD formats a dollar amount with two significant digits below a dollar
// and cents above it: $0.00, $0.0060, $0.012, $0.50, $3.00, $12.34. A cheap
// step costs fractions of a cent, and a figure rounded to $0.00 would read
// as free. Amounts below $0.0001 that are not zero read "<$0.0001".
func USD(v float64) string {
	switch {
	case v < 0:
		return "-" + USD(-v)
	case v == 0:
		return "$0.00"
	case v < 0.00005:
		return "<$0.0001"
	case v >= 0.995:
		return fmt.Sprintf("$%.2f", v)
	}
	// Two significant digits, between 2 and 4 decimals. A value that
	// rounds up into the next power of ten (0.0996 → 0.100) takes one
	// decimal fewer, so it still shows two digits ($0.10).
	e := int(math.Floor(math.Log10(v)))
	decimals := min(4, max(2, 1-e))
	if decimals == 1-e && decimals > 2 && v >= math.Pow10(e+1)-0.5*math.Pow10(-decimals) {
		decimals--
	}
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	return "$" + s
}

// Cost is a usage's cost: USD of its priced (or reported) cost, with "+?"
// when part of the usage could not be priced and the agent reported no
// cost for it (the figure then undercounts, and says so).
func Cost(u api.Usage) string {
	s := USD(u.CostUSD)
	if u.CostUnknown {
		s += "+?"
	}
	return s
}

// Tokens formats a token count: 950, 2.0k, 12.3k, 123k, 4.56M.
func Tokens(n int64) string {
	if n < 0 {
		return "-" + Tokens(-n)
	}
	switch {
	case n < 1_000:
		return strconv.FormatInt(n, 10)
	case n < 99_950:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	case n < 999_500:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	}
	return fmt.Sprintf("%.2fM", float64(n)/1e6)
}
