package ok

import "testing"

func TestFine(t *testing.T) {}
