package main

import "testing"

func TestFailingTrend(t *testing.T) {
	for _, tt := range []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{5}, "failing 5"},
		{[]int{5, 4, 3}, "failing 5 → 4 → 3"},
		{[]int{5, -1, 3}, "failing 5 → ? → 3"},
	} {
		if got := failingTrend(tt.in); got != tt.want {
			t.Errorf("failingTrend(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
