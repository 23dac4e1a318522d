package testreport

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// addFixtureSeeds seeds f with every fixture matching pattern.
func addFixtureSeeds(f *testing.F, pattern string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil {
		f.Fatal(err)
	}
	if len(paths) == 0 {
		f.Fatalf("no seeds match %s", pattern)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkInvariants holds for any input whatsoever.
func checkInvariants(t *testing.T, r Result) {
	t.Helper()
	for _, c := range []*int{r.Passed, r.Failed, r.Skipped} {
		if c != nil && *c < 0 {
			t.Fatalf("negative count: %s", r.Summary())
		}
	}
	for _, names := range [][]string{r.FailedNames, r.PassedNames, r.BuildFailures} {
		if len(names) > MaxNames {
			t.Fatalf("%d names, cap is %d", len(names), MaxNames)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if n == "" || len(n) > MaxNameLen || seen[n] {
				t.Fatalf("bad name %q (len %d, duplicate %v)", n, len(n), seen[n])
			}
			seen[n] = true
		}
	}
	known := []Format{FormatGo, FormatGoJSON, FormatPytest, FormatJest, FormatVitest, FormatMocha, FormatNodeTest,
		FormatTAP, FormatCargo, FormatJUnit, FormatUnittest}
	for _, f := range r.Formats {
		if !slices.Contains(known, f) {
			t.Fatalf("unknown format %q", f)
		}
	}
	if r.Recognized() != (len(r.Formats) > 0) || r.Recognized() && r.Format != r.Formats[0] {
		t.Fatalf("Format %q inconsistent with Formats %v", r.Format, r.Formats)
	}
	if !r.Recognized() && (r.Passed != nil || r.Failed != nil || r.Skipped != nil) {
		t.Fatalf("counts without a recognised format: %s", r.Summary())
	}
	if r.BuildFailed && !r.Recognized() {
		t.Fatal("a build failure without a recognised runner: a stray line must not fail a verification")
	}
	if r.Failed != nil && *r.Failed > 0 && !r.HasFailures() {
		t.Fatal("failed > 0 but HasFailures is false")
	}
	if r.Summary() == "" {
		t.Fatal("empty summary")
	}
}

func FuzzParse(f *testing.F) {
	addFixtureSeeds(f, "*/*.txt")
	f.Add([]byte("1..2\nok 1 - a\n    # Subtest: b\n    not ok 1 - c # TODO\nnot ok 2 - b\n"))
	f.Add([]byte("$ go test\n--- FAIL: TestA (0.00s)\nFAIL\tx\t0.1s\n$ pytest\n=== 1 failed, 2 passed in 0.1s ===\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := Parse(bytes.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, r)
		// Streaming: the result must not depend on how the bytes arrive.
		r2, err := Parse(iotest.HalfReader(bytes.NewReader(in)))
		if err != nil {
			t.Fatal(err)
		}
		if r.Summary() != r2.Summary() || !slices.Equal(r.FailedNames, r2.FailedNames) || !slices.Equal(r.PassedNames, r2.PassedNames) {
			t.Fatalf("result depends on read sizes: %q vs %q", r.Summary(), r2.Summary())
		}
		for _, n := range slices.Concat(r.FailedNames, r.PassedNames) {
			if utf8.ValidString(string(in)) && !utf8.ValidString(n) {
				t.Fatalf("name %q is not valid UTF-8 though the input was", n)
			}
		}
	})
}

func FuzzParseJUnit(f *testing.F) {
	addFixtureSeeds(f, "junit/*.xml")
	f.Add([]byte(`<testsuite tests="3" failures="1" skipped="1"/>`))
	f.Add([]byte(`<testsuites><testsuite><testsuite><testcase name="a"><skipped/></testcase></testsuite></testsuite></testsuites>`))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ParseJUnit(bytes.NewReader(in))
		if err == nil && !r.Recognized() {
			t.Fatal("no error but nothing recognised")
		}
		checkInvariants(t, r)

		// The text cap changes nothing below its limit, and never breaks UTF-8 above it.
		same, err := io.ReadAll(newCapText(iotest.HalfReader(bytes.NewReader(in)), len(in)+1))
		if err != nil || !bytes.Equal(same, in) {
			t.Fatalf("capText changed input below its limit: %q -> %q (%v)", in, same, err)
		}
		capped, err := io.ReadAll(newCapText(bytes.NewReader(in), 3))
		if err != nil || len(capped) > len(in) || utf8.Valid(in) && !utf8.Valid(capped) {
			t.Fatalf("capText(3) broke the input: %q -> %q (%v)", in, capped, err)
		}
	})
}
