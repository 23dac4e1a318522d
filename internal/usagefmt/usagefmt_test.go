package usagefmt

import (
	"testing"

	"github.com/loopd/loopd/internal/api"
)

func TestUSD(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "$0.00"},
		{0.00001, "<$0.0001"},
		{0.00006, "$0.0001"},
		{0.006, "$0.0060"},
		{0.00996, "$0.010"},
		{0.012, "$0.012"},
		{0.0996, "$0.10"},
		{0.5, "$0.50"},
		{0.456, "$0.46"},
		{0.994, "$0.99"},
		{0.996, "$1.00"},
		{3, "$3.00"},
		{12.345, "$12.35"},
		{-0.5, "-$0.50"},
	} {
		if got := USD(tc.v); got != tc.want {
			t.Errorf("USD(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestCost(t *testing.T) {
	if got := Cost(api.Usage{CostUSD: 0.012, CostUnknown: true}); got != "$0.012+?" {
		t.Errorf("Cost of a partly unpriced usage = %q, want $0.012+?", got)
	}
	if got := Cost(api.Usage{CostUSD: 1.5}); got != "$1.50" {
		t.Errorf("Cost = %q, want $1.50", got)
	}
}

func TestTokens(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0"},
		{950, "950"},
		{1000, "1.0k"},
		{2048, "2.0k"},
		{12_345, "12.3k"},
		{99_949, "99.9k"},
		{99_950, "100k"},
		{123_456, "123k"},
		{999_499, "999k"},
		{999_500, "1.00M"},
		{4_560_000, "4.56M"},
	} {
		if got := Tokens(tc.n); got != tc.want {
			t.Errorf("Tokens(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
