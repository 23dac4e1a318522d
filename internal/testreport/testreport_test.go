package testreport

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// want is a fixture's truth, testdata/<format>/<case>.want.json, checked by hand against the project in
// testdata/projects that produced the output (see testdata/README.md).
type want struct {
	Command       string   `json:"command"`
	ExitCode      int      `json:"exit_code"`
	Note          string   `json:"note,omitempty"`
	Format        Format   `json:"format"`
	Formats       []Format `json:"formats"`
	Passed        *int     `json:"passed"`
	Failed        *int     `json:"failed"`
	Skipped       *int     `json:"skipped"`
	FailedNames   []string `json:"failed_names"`
	PassedNames   []string `json:"passed_names"`
	BuildFailed   bool     `json:"build_failed"`
	BuildFailures []string `json:"build_failures"`
}

// got turns a Result into the comparable shape of want.
func got(r Result) want {
	orEmpty := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	formats := r.Formats
	if formats == nil {
		formats = []Format{}
	}
	return want{
		Format:        r.Format,
		Formats:       formats,
		Passed:        r.Passed,
		Failed:        r.Failed,
		Skipped:       r.Skipped,
		FailedNames:   orEmpty(r.FailedNames),
		PassedNames:   orEmpty(r.PassedNames),
		BuildFailed:   r.BuildFailed,
		BuildFailures: orEmpty(r.BuildFailures),
	}
}

// fixture is one saved runner output with its truth.
type fixture struct {
	name string // "go/fail" — also the subtest name
	path string
	want want
}

// loadFixtures reads every testdata/*/*.want.json whose output file has extension ext.
func loadFixtures(t testing.TB, ext string) []fixture {
	t.Helper()
	wants, err := filepath.Glob(filepath.Join("testdata", "*", "*.want.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []fixture
	for _, w := range wants {
		base := strings.TrimSuffix(w, ".want.json")
		path := base + ext
		if _, err := os.Stat(path); err != nil {
			continue
		}
		b, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		var f fixture
		if err := json.Unmarshal(b, &f.want); err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		f.name = filepath.ToSlash(strings.TrimPrefix(base, "testdata"+string(filepath.Separator)))
		f.path = path
		out = append(out, f)
	}
	if len(out) == 0 {
		t.Fatalf("no %s fixtures found", ext)
	}
	return out
}

func parseFile(t testing.TB, path string) Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r Result
	if strings.HasSuffix(path, ".xml") {
		r, err = ParseJUnit(f)
	} else {
		r, err = Parse(f)
	}
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return r
}

func diff(t *testing.T, g, w want) {
	t.Helper()
	w.Command, w.ExitCode, w.Note = "", 0, ""
	// Runners that run tests in parallel (cargo, go test ./...) print them in a different order on every
	// run, so fixtures compare names as sets; the order of appearance is tested on fixed input
	// (TestNamesInOrderOfAppearance).
	for _, names := range []*[]string{&g.FailedNames, &g.PassedNames, &g.BuildFailures, &w.FailedNames, &w.PassedNames, &w.BuildFailures} {
		*names = slices.Sorted(slices.Values(*names))
	}
	gj, _ := json.MarshalIndent(g, "", "  ")
	wj, _ := json.MarshalIndent(w, "", "  ")
	if !bytes.Equal(gj, wj) {
		t.Errorf("result differs from the truth\n got: %s\nwant: %s", gj, wj)
	}
}

func TestParseFixtures(t *testing.T) {
	for _, fx := range loadFixtures(t, ".txt") {
		t.Run(fx.name, func(t *testing.T) {
			r := parseFile(t, fx.path)
			diff(t, got(r), fx.want)

			// The verdict: failures in the output fail the step whatever the exit code said.
			shows := (fx.want.Failed != nil && *fx.want.Failed > 0) || fx.want.BuildFailed || len(fx.want.FailedNames) > 0
			if r.HasFailures() != shows {
				t.Errorf("HasFailures() = %v, want %v", r.HasFailures(), shows)
			}
			if v := r.VerificationFailed(fx.want.ExitCode); v != (shows || fx.want.ExitCode != 0) {
				t.Errorf("VerificationFailed(%d) = %v", fx.want.ExitCode, v)
			}
		})
	}
}

func TestParseJUnitFixtures(t *testing.T) {
	for _, fx := range loadFixtures(t, ".xml") {
		t.Run(fx.name, func(t *testing.T) {
			diff(t, got(parseFile(t, fx.path)), fx.want)
		})
	}
}

// TestFixturesCoverEveryFormat guards the promise that every runner family has real fixtures.
func TestFixturesCoverEveryFormat(t *testing.T) {
	seen := map[Format]bool{}
	for _, ext := range []string{".txt", ".xml"} {
		for _, fx := range loadFixtures(t, ext) {
			for _, f := range fx.want.Formats {
				seen[f] = true
			}
		}
	}
	for _, f := range []Format{FormatGo, FormatGoJSON, FormatPytest, FormatJest, FormatVitest, FormatMocha,
		FormatNodeTest, FormatTAP, FormatCargo, FormatJUnit, FormatUnittest} {
		if !seen[f] {
			t.Errorf("no fixture recognised as %q", f)
		}
	}
}

// TestParseStreamsIndependentlyOfReads feeds each fixture one byte per Read: the result must not
// depend on how the output arrives.
func TestParseStreamsIndependentlyOfReads(t *testing.T) {
	for _, fx := range loadFixtures(t, ".txt") {
		t.Run(fx.name, func(t *testing.T) {
			b, err := os.ReadFile(fx.path)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Parse(iotest.OneByteReader(bytes.NewReader(b)))
			if err != nil {
				t.Fatal(err)
			}
			diff(t, got(r), fx.want)
		})
	}
}

// TestParseSumsSections concatenates every pair of fixtures behind loopd's "$ <command>" headers, as a
// step with two verification commands logs them: counts add up (unknown stays unknown) and no failure
// or build failure is lost.
func TestParseSumsSections(t *testing.T) {
	fixtures := loadFixtures(t, ".txt")
	data := map[string][]byte{}
	for _, fx := range fixtures {
		b, err := os.ReadFile(fx.path)
		if err != nil {
			t.Fatal(err)
		}
		data[fx.name] = b
	}
	sum := func(a, b *int, aRec, bRec bool) *int {
		switch {
		case !aRec:
			return b
		case !bRec:
			return a
		case a == nil || b == nil:
			return nil
		}
		return new(*a + *b)
	}
	for _, a := range fixtures {
		for _, b := range fixtures {
			var log bytes.Buffer
			log.WriteString("$ first\n")
			log.Write(data[a.name])
			log.WriteString("$ second\n")
			log.Write(data[b.name])
			r, err := Parse(&log)
			if err != nil {
				t.Fatal(err)
			}
			aRec, bRec := a.want.Format != FormatUnknown, b.want.Format != FormatUnknown
			wa, wb := a.want, b.want
			checks := []struct {
				what      string
				got, want *int
			}{
				{"passed", r.Passed, sum(wa.Passed, wb.Passed, aRec, bRec)},
				{"failed", r.Failed, sum(wa.Failed, wb.Failed, aRec, bRec)},
				{"skipped", r.Skipped, sum(wa.Skipped, wb.Skipped, aRec, bRec)},
			}
			for _, c := range checks {
				if (c.got == nil) != (c.want == nil) || c.got != nil && *c.got != *c.want {
					t.Errorf("%s + %s: %s = %s, want %s", a.name, b.name, c.what, show(c.got), show(c.want))
				}
			}
			if r.BuildFailed != (wa.BuildFailed || wb.BuildFailed) {
				t.Errorf("%s + %s: BuildFailed = %v", a.name, b.name, r.BuildFailed)
			}
			for _, n := range slices.Concat(wa.FailedNames, wb.FailedNames) {
				if !slices.Contains(r.FailedNames, n) {
					t.Errorf("%s + %s: failed name %q lost", a.name, b.name, n)
				}
			}
			if aRec && r.Format != wa.Format || !aRec && r.Format != wb.Format {
				t.Errorf("%s + %s: Format = %q", a.name, b.name, r.Format)
			}
		}
	}
}

func show(p *int) string {
	if p == nil {
		return "nil"
	}
	b, _ := json.Marshal(*p)
	return string(b)
}

func TestParseUnknownOutput(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"empty", ""},
		{"blank lines", "\n\n\r\n"},
		{"build log", "gcc -O2 -o app main.c\nmain.c:3:5: warning: unused variable 'x'\nBuild finished.\n"},
		{"words that look like results", "all tests ok\nFAILED to reach the mirror, retrying\nPASS the salt\n"},
		{"lint output", "internal/x.go:12:2: error strings should not be capitalized (ST1005)\nexit status 1\n"},
		{"bundler checkmarks", "vite v5.0.0 building for production...\n✓ 34 modules transformed.\n✓ built in 1.20s\n"},
		{"markdown list", "Changes:\n  - fix parser\n  - add tests\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if r.Recognized() || r.Format != FormatUnknown || r.Formats != nil {
				t.Errorf("recognised %q (%v) in output with no test results", r.Format, r.Formats)
			}
			if r.Passed != nil || r.Failed != nil || r.Skipped != nil {
				t.Errorf("counts = %s/%s/%s, want all unknown (nil), never 0", show(r.Passed), show(r.Failed), show(r.Skipped))
			}
			if r.HasFailures() || r.Summary() != "tests unknown" {
				t.Errorf("HasFailures = %v, Summary = %q", r.HasFailures(), r.Summary())
			}
			if !r.VerificationFailed(1) || r.VerificationFailed(0) {
				t.Error("with nothing recognised the exit code alone must decide")
			}
		})
	}
}

// TestParseFailuresOnly covers output that says tests failed and little else: the lines a truncated or
// filtered log may keep. The failure must never be lost, and counts the output does not show stay nil.
func TestParseFailuresOnly(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		format      Format
		failed      *int
		failedNames []string
		build       bool
	}{
		{
			name:   "go package FAIL line alone",
			in:     "FAIL\texample.com/x\t0.012s\nFAIL\n",
			format: FormatGo, failed: new(1), failedNames: []string{"example.com/x"},
		},
		{
			name:   "go FAIL lines without the package line",
			in:     "--- FAIL: TestX (0.00s)\n    --- FAIL: TestX/sub (0.00s)\n",
			format: FormatGo, failed: new(2), failedNames: []string{"TestX", "TestX/sub"},
		},
		{
			name:   "pytest short summary without its counts line",
			in:     "FAILED tests/test_x.py::test_y - assert 1 == 2\n",
			format: FormatPytest, failedNames: []string{"tests/test_x.py::test_y"},
		},
		{
			name:   "pytest counts line alone",
			in:     "1 failed in 0.01s\n",
			format: FormatPytest, failed: new(1),
		},
		{
			name:   "jest counts alone",
			in:     "Tests:       1 failed, 1 total\n",
			format: FormatJest, failed: new(1),
		},
		{
			name:   "cargo result line alone",
			in:     "test result: FAILED. 0 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
			format: FormatCargo, failed: new(2),
		},
		{
			name:   "cargo binary that crashed",
			in:     "running 2 tests\ntest a ... ok\nerror: test failed, to rerun pass `--lib`\n\nCaused by:\n  process didn't exit successfully (signal: 11, SIGSEGV)\n",
			format: FormatCargo, failed: new(1),
		},
		{
			name:   "TAP stream that died before its plan was done",
			in:     "1..3\nok 1 - a\n",
			format: FormatTAP, failed: new(2),
		},
		{
			name:   "TAP bail out",
			in:     "1..2\nok 1 - a\nBail out! database down\n",
			format: FormatTAP, failed: new(1), build: true,
		},
		{
			name:   "go build failure alone",
			in:     "FAIL\texample.com/x [build failed]\n",
			format: FormatGo, failed: new(0), build: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if r.Format != tt.format {
				t.Errorf("Format = %q, want %q", r.Format, tt.format)
			}
			if show(r.Failed) != show(tt.failed) {
				t.Errorf("Failed = %s, want %s", show(r.Failed), show(tt.failed))
			}
			if !slices.Equal(r.FailedNames, tt.failedNames) {
				t.Errorf("FailedNames = %q, want %q", r.FailedNames, tt.failedNames)
			}
			if r.BuildFailed != tt.build {
				t.Errorf("BuildFailed = %v, want %v", r.BuildFailed, tt.build)
			}
			if !r.HasFailures() || !r.VerificationFailed(0) {
				t.Errorf("a failure in the output must fail the verification even with exit code 0: %q", r.Summary())
			}
		})
	}
}

func TestSummary(t *testing.T) {
	names := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, "T"+string(rune('a'+i)))
		}
		return out
	}
	tests := []struct {
		name string
		r    Result
		want string
	}{
		{"unknown", Result{}, "tests unknown"},
		{
			"passed and failed with names",
			Result{Format: FormatGo, Passed: new(12), Failed: new(2), Skipped: new(0), FailedNames: []string{"TestParseFails", "TestTable/case_b"}},
			"12 passed, 2 failed (TestParseFails, TestTable/case_b)",
		},
		{
			"skipped shown when known",
			Result{Format: FormatPytest, Passed: new(3), Failed: new(0), Skipped: new(1)},
			"3 passed, 0 failed, 1 skipped",
		},
		{
			"names capped with +N more",
			Result{Format: FormatJest, Passed: new(1), Failed: new(9), FailedNames: names(7)},
			"1 passed, 9 failed (Ta, Tb, Tc, Td, Te +4 more)",
		},
		{
			"passed unknown (go test without -v)",
			Result{Format: FormatGo, Failed: new(0)},
			"0 failed, passed count unknown",
		},
		{
			"build failure comes first",
			Result{Format: FormatGo, Failed: new(0), BuildFailed: true, BuildFailures: []string{"example.com/x"}},
			"build failed (example.com/x), 0 failed, passed count unknown",
		},
		{
			"recognised without counts",
			Result{Format: FormatPytest, FailedNames: []string{"t.py::a"}},
			"failed (t.py::a), counts unknown",
		},
		{
			"build failed with no counts",
			Result{Format: FormatCargo, BuildFailed: true, BuildFailures: []string{"calc"}},
			"build failed (calc), counts unknown",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Summary(); got != tt.want {
				t.Errorf("Summary() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCleanLine(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"crlf", "ok 1 - a\r\n", "ok 1 - a"},
		{"progress overwritten with CR", "running 10%\rrunning 50%\rtest result: ok. 1 passed; 0 failed; 0 ignored\n", "test result: ok. 1 passed; 0 failed; 0 ignored"},
		{"colour and CR", "\x1b[2K\r\x1b[32m✓\x1b[39m a\n", "✓ a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cleanLine([]byte(tt.in)); got != tt.want {
				t.Errorf("cleanLine(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestParseLongLines checks that a line longer than MaxLineLen is cut, not fatal, and does not disturb
// the lines around it.
func TestParseLongLines(t *testing.T) {
	var b strings.Builder
	b.WriteString("=== RUN   TestA\n--- PASS: TestA (0.00s)\n")
	b.WriteString("    log: " + strings.Repeat("x", 3*MaxLineLen) + "\n")
	b.WriteString("--- FAIL: TestB (0.00s)\n")
	b.WriteString("--- FAIL: " + strings.Repeat("C", 2*MaxLineLen) + " (0.00s)\n") // cut: no " (" left
	b.WriteString("FAIL\texample.com/x\t0.1s\n")
	r, err := Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if show(r.Passed) != "1" || show(r.Failed) != "1" || !slices.Equal(r.FailedNames, []string{"TestB"}) {
		t.Errorf("got %s", r.Summary())
	}
}

// TestNamesCapped checks that names stop at MaxNames, each at MaxNameLen bytes, while counts stay exact.
func TestNamesCapped(t *testing.T) {
	const n = MaxNames + 500
	var b strings.Builder
	for i := range n {
		b.WriteString("--- FAIL: TestFail")
		b.WriteString(strings.Repeat("x", i%3))
		b.WriteString(itoa(i))
		b.WriteString(" (0.00s)\n")
	}
	long := strings.Repeat("é", MaxNameLen) // 2 bytes each: the cut must land on a rune boundary
	b.WriteString("--- PASS: " + long + " (0.00s)\n")
	b.WriteString("FAIL\texample.com/x\t0.1s\n")
	r, err := Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if show(r.Failed) != itoa(n) {
		t.Errorf("Failed = %s, want %d", show(r.Failed), n)
	}
	if len(r.FailedNames) != MaxNames {
		t.Errorf("len(FailedNames) = %d, want %d", len(r.FailedNames), MaxNames)
	}
	if len(r.PassedNames) != 1 || len(r.PassedNames[0]) > MaxNameLen || !strings.HasPrefix(long, r.PassedNames[0]) {
		t.Errorf("long name not cut cleanly: %d bytes", len(r.PassedNames[0]))
	}
	if s := r.Summary(); !strings.Contains(s, "+"+itoa(n-summaryNames)+" more") {
		t.Errorf("Summary() = %q, want +%d more", s, n-summaryNames)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestParseReadError returns what was read and the error.
func TestParseReadError(t *testing.T) {
	r, err := Parse(io.MultiReader(strings.NewReader("--- FAIL: TestA (0.00s)\n"), iotest.ErrReader(io.ErrUnexpectedEOF)))
	if err == nil || !strings.Contains(err.Error(), "read test output") {
		t.Fatalf("err = %v, want a wrapped read error", err)
	}
	if !slices.Equal(r.FailedNames, []string{"TestA"}) {
		t.Errorf("FailedNames = %q, want what was read before the error", r.FailedNames)
	}
}

func TestParseJUnitErrors(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"not xml", "this is not a report"},
		{"no suites", "<?xml version=\"1.0\"?><coverage/>"},
		{"cut off", "<testsuites><testsuite name=\"a\"><testcase name=\"x\"><failure>boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseJUnit(strings.NewReader(tt.in)); err == nil {
				t.Error("want an error")
			}
		})
	}
}

func TestParseJUnitShapes(t *testing.T) {
	tests := []struct {
		name                    string
		in                      string
		passed, failed, skipped int
		failedNames             []string
	}{
		{
			name:   "suite totals only",
			in:     `<testsuite name="s" tests="5" failures="1" errors="1" skipped="1"/>`,
			passed: 2, failed: 2, skipped: 1,
		},
		{
			name: "nested suites count cases once",
			in: `<testsuites tests="3"><testsuite name="outer" tests="3" failures="1">` +
				`<testsuite name="inner" tests="2" failures="1"><testcase classname="pkg.C" name="a"><error/></testcase>` +
				`<testcase classname="pkg.C" name="b"/></testsuite><testcase name="c"/></testsuite></testsuites>`,
			passed: 2, failed: 1, failedNames: []string{"pkg.C.a"},
		},
		{
			name:   "cut off report keeps what it read",
			in:     `<testsuite><testcase classname="k" name="a"/><testcase classname="k" name="b"><failure/></testcase>`,
			passed: 1, failed: 1, failedNames: []string{"k.b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := ParseJUnit(strings.NewReader(tt.in))
			if show(r.Passed) != itoa(tt.passed) || show(r.Failed) != itoa(tt.failed) || show(r.Skipped) != itoa(tt.skipped) {
				t.Errorf("got %s", r.Summary())
			}
			if !slices.Equal(r.FailedNames, tt.failedNames) {
				t.Errorf("FailedNames = %q, want %q", r.FailedNames, tt.failedNames)
			}
			if r.Format != FormatJUnit {
				t.Errorf("Format = %q", r.Format)
			}
		})
	}
}

// TestParseSumsWithoutHeaders concatenates every pair of fixtures with nothing between them, as
// `make test` running two runners would: counts still add up. The exception is two `go test` runs,
// which read as one go section (one -v and one not: pass counts are then known for only part of it).
func TestParseSumsWithoutHeaders(t *testing.T) {
	fixtures := loadFixtures(t, ".txt")
	for _, a := range fixtures {
		for _, b := range fixtures {
			if slices.Contains(a.want.Formats, FormatGo) && slices.Contains(b.want.Formats, FormatGo) {
				continue
			}
			da, err := os.ReadFile(a.path)
			if err != nil {
				t.Fatal(err)
			}
			db, err := os.ReadFile(b.path)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Parse(io.MultiReader(bytes.NewReader(da), bytes.NewReader(db)))
			if err != nil {
				t.Fatal(err)
			}
			aRec, bRec := a.want.Format != FormatUnknown, b.want.Format != FormatUnknown
			sum := func(x, y *int) string {
				switch {
				case !aRec:
					return show(y)
				case !bRec:
					return show(x)
				case x == nil || y == nil:
					return "nil"
				}
				return itoa(*x + *y)
			}
			g := show(r.Passed) + "/" + show(r.Failed) + "/" + show(r.Skipped)
			w := sum(a.want.Passed, b.want.Passed) + "/" + sum(a.want.Failed, b.want.Failed) + "/" + sum(a.want.Skipped, b.want.Skipped)
			if g != w {
				t.Errorf("%s + %s: passed/failed/skipped = %s, want %s", a.name, b.name, g, w)
			}
			if r.BuildFailed != (a.want.BuildFailed || b.want.BuildFailed) {
				t.Errorf("%s + %s: BuildFailed = %v", a.name, b.name, r.BuildFailed)
			}
		}
	}
}

func TestNamesInOrderOfAppearance(t *testing.T) {
	in := "--- FAIL: TestZ (0.00s)\n" +
		"--- FAIL: TestA (0.00s)\n" +
		"FAILED tests/z.py::test_b - boom\n" +
		"--- FAIL: TestZ (0.00s)\n" + // a repeat: de-duplicated, counted
		"FAIL\texample.com/x\t0.1s\n" +
		"FAILED tests/a.py::test_a\n" +
		"=== 2 failed in 0.01s ===\n"
	r, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"TestZ", "TestA", "tests/z.py::test_b", "tests/a.py::test_a"}
	if !slices.Equal(r.FailedNames, wantNames) {
		t.Errorf("FailedNames = %q, want %q", r.FailedNames, wantNames)
	}
	if show(r.Failed) != "5" {
		t.Errorf("Failed = %s, want 5 (3 go + 2 pytest)", show(r.Failed))
	}
	if !slices.Equal(r.Formats, []Format{FormatGo, FormatPytest}) {
		t.Errorf("Formats = %v", r.Formats)
	}
}

func TestCapText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"short text untouched", `<a x="1">hi&lt;</a>`, `<a x="1">hi&lt;</a>`},
		{"long text cut", `<a>abcdefgh</a>`, `<a>abcd</a>`},
		{"entity not cut", `<a>abc&amp;defgh</a>`, `<a>abc&amp;</a>`},
		{"multi-byte character not cut", `<a>abcdéfgh</a>`, `<a>abcdé</a>`},
		{"attribute value cut, quote kept", `<a m="abcdefgh" n='x'>t</a>`, `<a m="abcd" n='x'>t</a>`},
		{"cdata cut, terminator kept", `<a><![CDATA[ab<c>]]]></a>`, `<a><![CDATA[ab<c]]></a>`},
		{"cdata with brackets", `<a><![CDATA[a]]]></a>`, `<a><![CDATA[a]]]></a>`},
		{"comment cut", `<!--abcdef--><a/>`, `<!--abcd--><a/>`},
		{"cut off inside a terminator (fuzz regression)", `<!---`, `<!---`},
		{"greater-than inside attribute", `<a m="x>y">t</a>`, `<a m="x>y">t</a>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := io.ReadAll(newCapText(strings.NewReader(tt.in), 4))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("capText(%q) = %q, want %q", tt.in, out, tt.want)
			}
		})
	}
}

func TestWithReport(t *testing.T) {
	console := parseFile(t, filepath.Join("testdata", "pytest", "fail.txt"))
	report := parseFile(t, filepath.Join("testdata", "junit", "pytest.xml"))
	goBuild := parseFile(t, filepath.Join("testdata", "go", "build_failed.txt"))
	tests := []struct {
		name          string
		console, rep  Result
		wantFormats   []Format
		wantFailed    string
		wantBuild     bool
		wantFirstName string
	}{
		{"report wins", console, report, []Format{FormatJUnit, FormatPytest}, "4", false, "tests.test_calc.test_sub"},
		{"no report: console stands", console, Result{}, []Format{FormatPytest}, "4", false, "tests/test_calc.py::test_sub"},
		{"console build failure kept", goBuild, report, []Format{FormatJUnit, FormatGo}, "4", true, "tests.test_calc.test_sub"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.console.WithReport(tt.rep)
			if !slices.Equal(r.Formats, tt.wantFormats) || show(r.Failed) != tt.wantFailed || r.BuildFailed != tt.wantBuild ||
				r.FailedNames[0] != tt.wantFirstName {
				t.Errorf("got %v %s build=%v first=%q", r.Formats, r.Summary(), r.BuildFailed, r.FailedNames[0])
			}
			if r.Format != r.Formats[0] {
				t.Errorf("Format %q, Formats %v", r.Format, r.Formats)
			}
		})
	}
}
