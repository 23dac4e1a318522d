package editdist

import (
	"math"
	"strings"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"max_iteratoins", "max_iterations", 2},
		{"verifcation", "verification", 1},
		{"kitten", "sitting", 3},
		{"prïce", "price", 1}, // runes, not bytes
		{strings.Repeat("a", 64), strings.Repeat("a", 64), 0},
		{strings.Repeat("a", 65), "a", math.MaxInt},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (not symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}
