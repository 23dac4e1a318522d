package crash

import "testing"

func TestDivOK(t *testing.T) {
	if Div(4, 2) != 2 {
		t.Fatal("bad")
	}
}

func TestDivZero(t *testing.T) {
	_ = Div(1, 0)
}
