package nope

import (
	"testing"

	"example.com/setup/missing"
)

func TestNope(t *testing.T) { missing.Do() }
