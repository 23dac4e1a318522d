// Package testreport turns the captured output of a verification command (the project's own tests, run
// by loopd after each agent attempt) into test results, the way a person reading the output would.
//
// A test command's exit code alone is not the truth: `cmd1; cmd2` hides the first exit code, some runners
// exit 0 with failures, and a package that does not compile is not "0 tests, passed". Parse reads the
// output instead.
//
// # Detection
//
// Parse reads the output once, line by line (lines are capped at MaxLineLen, ANSI colour and other
// escape sequences are stripped, a trailing CR is dropped and a line overwritten with bare CRs keeps only
// what a terminal would show). Every line goes to every runner parser (go test, go test -json, pytest,
// the JavaScript family, TAP, cargo, Python unittest); each parser matches only its runner's distinctive
// lines and keeps a little state (a package, a test binary, a TAP stream, a describe stack). There is no up-front "which
// runner is this" guess, so a log that holds several runners' output — `make test` with build logs
// around it, `go test ./... && pytest`, or several verification commands behind loopd's `$ <command>`
// header lines — is read as the sum of its parts.
//
// Each parser emits a section whenever a runner's summary closes a run (a pytest `=== … in 0.1s ===`
// line, jest's `Tests:`, cargo's `test result:` per test binary, a TAP stream's end, a go test section's
// end). Summary lines are the authority for counts; individual result lines give the names. Counts of all
// sections are added up; a count is nil (unknown) when any section could not show it, never a guess such
// as 0 — for example `go test` without -v prints no pass lines, so Passed is nil for it. A `$ <command>`
// header line closes every open section, as does the end of the output.
//
// Where runners share marks (✓ is jest's and vitest's, ✔ mocha's and node's), the JavaScript parser
// keeps a describe stack by indentation and holds the names back until a summary line says which runner
// printed them; names that no summary claims (a bundler's "✓ built" line) are dropped.
//
// # Names
//
// Names are printed the way the runner identifies a test: Go "TestTable/case_b" (parents included, as go
// counts them), pytest node ids "tests/test_x.py::TestC::test_y[p]", cargo "tests::nested::deep" or
// "src/lib.rs - add (line 3)"; the JavaScript runners and nested TAP join the describe/suite path and
// the test title with " > " ("math > mul > mul(2, 2) = 5") whatever separator the runner itself uses, so
// a name reads the same in jest, vitest, mocha, node and TAP output. JUnit names are described at
// ParseJUnit. Names are de-duplicated, kept in order of appearance, at most MaxNames of each kind and
// MaxNameLen bytes each; counts stay exact when names are capped.
//
// # What counts as what
//
// Errors that belong to one test (a pytest fixture error, a JUnit <error>, a cancelled node test) count
// as failed. Skipped includes skips, xfails, todos and ignored tests. A failure that belongs to no test —
// a Go package that FAILs with no failing test (a panic in TestMain, a timeout) — counts as one failed
// test named after the package, so it is never lost. BuildFailed is set when something failed before or
// around the tests: a Go package with [build failed] or [setup failed], a cargo crate that did not
// compile, a pytest collection error, a jest suite that failed to run, a vitest unhandled error, a TAP
// "Bail out!". Counts then cover only the tests that ran.
//
// # JUnit reports
//
// When the step names a JUnit XML report, ParseJUnit reads it and Result.WithReport lets it override the
// console: a report is written for machines and is more trustworthy than console text. The caller must
// make sure the report is this run's (remove it before the command runs, or compare its modification
// time): a stale report would describe an earlier attempt.
package testreport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/loopd/loopd/internal/termtext"
)

// Format names the runner whose output was recognised.
type Format string

const (
	// FormatUnknown means no runner's output was recognised.
	FormatUnknown Format = ""
	// FormatGo is `go test` console output, default or -v.
	FormatGo Format = "go"
	// FormatGoJSON is `go test -json` (test2json) events.
	FormatGoJSON Format = "go-json"
	// FormatPytest is pytest console output: default, -q, -v, -rA.
	FormatPytest Format = "pytest"
	// FormatJest is jest's default reporter, verbose or not.
	FormatJest Format = "jest"
	// FormatVitest is vitest's default or verbose reporter.
	FormatVitest Format = "vitest"
	// FormatMocha is mocha's spec reporter.
	FormatMocha Format = "mocha"
	// FormatNodeTest is node's built-in test runner, spec or TAP reporter.
	FormatNodeTest Format = "node-test"
	// FormatTAP is any other Test Anything Protocol producer.
	FormatTAP Format = "tap"
	// FormatCargo is `cargo test` (libtest) output.
	FormatCargo Format = "cargo"
	// FormatJUnit is a JUnit XML report read by ParseJUnit.
	FormatJUnit Format = "junit"
	// FormatUnittest is Python unittest output (python -m unittest, default or -v).
	FormatUnittest Format = "unittest"
)

// Limits that keep memory bounded whatever the size of the output.
const (
	// MaxLineLen is the longest line Parse looks at; the rest of a longer line is skipped.
	MaxLineLen = 64 << 10
	// MaxNames is how many failed (and, separately, passed) names a Result keeps.
	MaxNames = 1000
	// MaxNameLen is the longest name kept, in bytes; longer names are cut at a rune boundary.
	MaxNameLen = 512
)

// Result is what a verification command's output says about its tests. Its JSON form uses the field
// names of a step's "tests" object in the product contract (null for an unknown count).
type Result struct {
	// Format is the runner recognised first; FormatUnknown when none.
	Format Format `json:"format"`
	// Formats lists every recognised runner in order of first appearance (several for a mixed log).
	Formats []Format `json:"formats,omitempty"`
	// Passed, Failed and Skipped are nil when the output does not show them (unknown), never a guess
	// such as 0.
	Passed  *int `json:"passed"`
	Failed  *int `json:"failed"`
	Skipped *int `json:"skipped"`
	// FailedNames are the failed tests as the runner prints them (see the package doc), in order of
	// appearance, de-duplicated, at most MaxNames.
	FailedNames []string `json:"failed_names"`
	// PassedNames are the passed tests, like FailedNames; runners that print no pass lines give none.
	PassedNames []string `json:"passed_names"`
	// BuildFailed reports that a package, crate or module failed to compile, or a collection or setup
	// error happened: the run FAILED its tests even if no test failed.
	BuildFailed bool `json:"build_failed"`
	// BuildFailures names what failed to build or collect (Go package, cargo crate, pytest module, jest
	// or vitest test file), when the output names it; at most MaxNames.
	BuildFailures []string `json:"build_failures,omitempty"`
}

// Recognized reports whether a runner's output was recognised.
func (r Result) Recognized() bool { return r.Format != FormatUnknown }

// HasFailures reports whether the output shows a failure: a failed test, a failed name, or a build
// failure.
func (r Result) HasFailures() bool {
	return (r.Failed != nil && *r.Failed > 0) || len(r.FailedNames) > 0 || r.BuildFailed
}

// VerificationFailed decides a verification step from its exit code and this result: output that shows
// failures fails the step even when the command exited 0 (a `cmd1; cmd2` script hides cmd1's status),
// and a non-zero exit fails it even when every recognised test passed (a later command, a linter, may
// have failed). When nothing was recognised this is the exit code alone.
func (r Result) VerificationFailed(exitCode int) bool {
	return exitCode != 0 || r.HasFailures()
}

// summaryNames is how many names Summary shows before "+N more".
const summaryNames = 5

// Summary renders the result for a person, e.g.
// "12 passed, 2 failed (TestParseFails, TestTable/case_b)". Skipped appears only when known and non-zero,
// unknown counts say so, and "build failed" comes first when it applies.
func (r Result) Summary() string {
	if !r.Recognized() {
		if r.BuildFailed {
			return "build failed, tests unknown"
		}
		return "tests unknown"
	}
	var parts []string
	if r.BuildFailed {
		parts = append(parts, "build failed"+nameList(r.BuildFailures, len(r.BuildFailures)))
	}
	if r.Passed != nil {
		parts = append(parts, fmt.Sprintf("%d passed", *r.Passed))
	}
	switch {
	case r.Failed != nil:
		parts = append(parts, fmt.Sprintf("%d failed", *r.Failed)+nameList(r.FailedNames, *r.Failed))
	case len(r.FailedNames) > 0:
		parts = append(parts, "failed"+nameList(r.FailedNames, len(r.FailedNames)))
	}
	if r.Skipped != nil && *r.Skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped", *r.Skipped))
	}
	switch {
	case r.Passed == nil && r.Failed == nil:
		parts = append(parts, "counts unknown")
	case r.Passed == nil:
		parts = append(parts, "passed count unknown")
	}
	return strings.Join(parts, ", ")
}

// nameList renders " (a, b, c +N more)" for up to summaryNames names out of total; "" when none.
func nameList(names []string, total int) string {
	if len(names) == 0 {
		return ""
	}
	shown := names[:min(len(names), summaryNames)]
	s := " (" + strings.Join(shown, ", ")
	if more := max(total, len(names)) - len(shown); more > 0 {
		s += fmt.Sprintf(" +%d more", more)
	}
	return s + ")"
}

// Parse reads a verification command's captured output and reports what it says about tests, detecting
// the runner(s) automatically (see the package doc). It streams: memory stays bounded whatever the size
// of the output. On a read error it returns what was parsed so far along with the error.
func Parse(r io.Reader) (Result, error) {
	c := newCollector()
	parsers := []lineParser{
		newGoParser(c),
		newGoJSONParser(c),
		newPytestParser(c),
		newJSParser(c),
		newTAPParser(c),
		newCargoParser(c),
		newUnittestParser(c),
	}
	boundary := func() {
		for _, p := range parsers {
			p.boundary()
		}
	}
	err := scanLines(r, func(line string) {
		if isCommandHeader(line) {
			boundary()
			return
		}
		for _, p := range parsers {
			p.line(line)
		}
	})
	boundary()
	res := c.result()
	if err != nil {
		return res, fmt.Errorf("read test output: %w", err)
	}
	return res, nil
}

// lineParser is one runner family's view of the output.
type lineParser interface {
	// line handles one cleaned line (no newline, no ANSI codes).
	line(s string)
	// boundary closes whatever is open: a `$ <command>` header or the end of the output.
	boundary()
}

// isCommandHeader reports whether line is loopd's `$ <command>` header printed before each of several
// verification commands.
func isCommandHeader(line string) bool {
	return len(line) > 2 && line[0] == '$' && line[1] == ' ' && line[2] != ' '
}

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// scanLines calls fn for every line of r, cleaned by cleanLine. Lines longer than MaxLineLen are cut
// there (the rest is read and dropped), so memory does not depend on the input.
func scanLines(r io.Reader, fn func(string)) error {
	// Pooled: the daemon parses every verification step's log, and a new
	// 32 KiB buffer each time was a quarter of what a no-op step allocated
	// (scheduler.BenchmarkNoOpIteration), paid again in garbage collection.
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil) // hold no reference to r
		readers.Put(br)
	}()
	buf := make([]byte, 0, 512)
	for {
		chunk, err := br.ReadSlice('\n')
		if room := MaxLineLen - len(buf); room > 0 {
			buf = append(buf, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(buf) > 0 {
			fn(cleanLine(buf))
		}
		if cap(buf) > 4<<10 {
			// Do not keep a 64 KiB buffer alive for the short lines that usually follow.
			buf = make([]byte, 0, 512)
		} else {
			buf = buf[:0]
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// cleanLine turns raw bytes into the text a terminal would show: no line ending, only what follows the
// last bare CR (progress output overwrites itself), no ANSI escape sequences. It modifies b.
func cleanLine(b []byte) string {
	b = bytes.TrimRight(b, "\r\n")
	if i := bytes.LastIndexByte(b, '\r'); i >= 0 {
		b = b[i+1:]
	}
	return string(termtext.Strip(b))
}

// count is one number a section may or may not show.
type count struct {
	n     int
	known bool
}

// known returns a shown count.
func known(n int) count { return count{n: max(n, 0), known: true} }

// unknown is a count the output does not show.
var unknown = count{}

// section is what one closed run of one runner showed: one pytest session, one cargo test binary, one
// TAP stream, one go test section.
type section struct {
	passed, failed, skipped count
}

// collector accumulates the sections and names that all parsers find.
type collector struct {
	formats                  []Format
	passed, failed, skipped  count
	sections                 int
	failedNames, passedNames nameSet
	buildFailed              bool
	buildFailures            nameSet
}

func newCollector() *collector {
	return &collector{}
}

// recognize notes that format was seen, keeping the first-appearance order.
func (c *collector) recognize(f Format) {
	for _, have := range c.formats {
		if have == f {
			return
		}
	}
	c.formats = append(c.formats, f)
}

// add adds one closed section of format f.
func (c *collector) add(f Format, s section) {
	c.recognize(f)
	if c.sections == 0 {
		c.passed, c.failed, c.skipped = s.passed, s.failed, s.skipped
	} else {
		c.passed = addCount(c.passed, s.passed)
		c.failed = addCount(c.failed, s.failed)
		c.skipped = addCount(c.skipped, s.skipped)
	}
	c.sections++
}

// addCount sums two counts: unknown if either is unknown; saturating so a hostile input cannot wrap
// it negative.
func addCount(a, b count) count {
	if !a.known || !b.known {
		return unknown
	}
	if a.n > math.MaxInt-b.n {
		return known(math.MaxInt)
	}
	return known(a.n + b.n)
}

// fail records a failed test name.
func (c *collector) fail(name string) { c.failedNames.add(name) }

// pass records a passed test name.
func (c *collector) pass(name string) { c.passedNames.add(name) }

// build records a build or collection failure; name may be empty when the output does not say what.
func (c *collector) build(name string) {
	c.buildFailed = true
	c.buildFailures.add(name)
}

func (c *collector) result() Result {
	res := Result{
		Formats:       c.formats,
		FailedNames:   c.failedNames.list,
		PassedNames:   c.passedNames.list,
		BuildFailed:   c.buildFailed,
		BuildFailures: c.buildFailures.list,
	}
	if len(c.formats) > 0 {
		res.Format = c.formats[0]
	}
	if c.sections > 0 {
		res.Passed = c.passed.ptr()
		res.Failed = c.failed.ptr()
		res.Skipped = c.skipped.ptr()
	}
	return res
}

func (c count) ptr() *int {
	if !c.known {
		return nil
	}
	return new(c.n)
}

// nameSet is an ordered, de-duplicated, capped list of names.
type nameSet struct {
	list []string
	seen map[string]struct{}
}

// add appends name unless it is empty, already present, or the set is full. The name is copied, so it
// never pins the line it came from.
func (s *nameSet) add(name string) {
	name = strings.TrimSpace(name)
	if name == "" || len(s.list) >= MaxNames {
		return
	}
	name = truncateName(name)
	if _, ok := s.seen[name]; ok {
		return
	}
	if s.seen == nil {
		s.seen = make(map[string]struct{})
	}
	name = strings.Clone(name)
	s.seen[name] = struct{}{}
	s.list = append(s.list, name)
}

// remove takes name out of the set, if it is there.
func (s *nameSet) remove(name string) {
	if _, ok := s.seen[name]; !ok {
		return
	}
	delete(s.seen, name)
	s.list = slices.DeleteFunc(s.list, func(n string) bool { return n == name })
}

// truncateName cuts name to at most MaxNameLen bytes at a rune boundary.
func truncateName(name string) string {
	if len(name) <= MaxNameLen {
		return name
	}
	cut := MaxNameLen
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut]
}

// pendingNames holds names until a summary line says which runner printed them.
type pendingNames struct {
	failed, passed nameSet
}

func (p *pendingNames) fail(name string) { p.failed.add(name) }

func (p *pendingNames) pass(name string) { p.passed.add(name) }

// flush hands the held names to c and forgets them.
func (p *pendingNames) flush(c *collector) {
	for _, n := range p.failed.list {
		c.fail(n)
	}
	for _, n := range p.passed.list {
		c.pass(n)
	}
	p.reset()
}

func (p *pendingNames) reset() { *p = pendingNames{} }

// atoi parses a non-negative decimal count; ok is false for anything else, including overflow.
func atoi(s string) (int, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
