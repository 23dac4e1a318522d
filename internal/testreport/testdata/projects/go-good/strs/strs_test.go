package strs

import "testing"

func TestUpper(t *testing.T) {
	if Upper("a") != "A" {
		t.Fatal("bad")
	}
}

func TestUpperEmpty(t *testing.T) {
	if Upper("") != "" {
		t.Fatal("bad")
	}
}
