package calc

import "testing"

func TestAdd(t *testing.T) {
	if got := Add(2, 3); got != 5 {
		t.Errorf("Add(2, 3) = %d, want 5", got)
	}
}

func TestSub(t *testing.T) {
	if got := Sub(7, 3); got != 4 {
		t.Errorf("Sub(7, 3) = %d, want 4", got)
	}
}

func TestMul(t *testing.T) {
	if got := Mul(4, 3); got != 12 {
		t.Errorf("Mul(4, 3) = %d, want 12", got)
	}
}

func TestMax(t *testing.T) {
	for _, c := range []struct{ a, b, want int }{{1, 2, 2}, {5, -1, 5}} {
		if got := Max(c.a, c.b); got != c.want {
			t.Errorf("Max(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
