package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The checked-in kinds_gen.go is what the descriptors generate: a condition type
// added, renamed or reordered without go generate fails here.
func TestGeneratedFileIsUpToDate(t *testing.T) {
	want, err := Generate("..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", Output))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("internal/stop/%s is stale: run go generate ./internal/stop", Output)
	}
}

func TestGenerateFindsEveryDescriptor(t *testing.T) {
	dir := t.TempDir()
	src := `package stop

var aKind = &kind[A]{typ: "a"}

var (
	notAKind = kind[B]{}
	bKind    = &kind[B]{typ: "b"}
	other    = &struct{}{}
)
`
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"var kinds = []descriptor{\n\taKind,\n\tbKind,\n}", "func (c A) MarshalJSON() ([]byte, error) { return aKind.marshal(c) }",
		"func (B) kind() descriptor", "func (c B) Reason() string"} {
		if !strings.Contains(s, want) {
			t.Errorf("generated file lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "notAKind") || strings.Contains(s, "other") {
		t.Errorf("generated methods for a non-descriptor:\n%s", s)
	}

	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte("package stop\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(dir); err == nil {
		t.Error("no error for a package without descriptors")
	}
}
