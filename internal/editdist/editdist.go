// Package editdist measures how far apart two short strings are, for the
// "did you mean" suggestions of config keys and stop-condition JSON.
package editdist

import "math"

// maxLen bounds the inputs: suggestions are for typos, not for essays, and
// the cost is quadratic.
const maxLen = 64

// Distance returns the Levenshtein distance between a and b, in runes, or
// math.MaxInt when either is longer than 64 runes.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > maxLen || len(rb) > maxLen {
		return math.MaxInt
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
