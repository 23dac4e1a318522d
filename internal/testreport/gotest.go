package testreport

import (
	"encoding/json"
	"strconv"
	"strings"
)

// goParser reads `go test` console output, default or -v, and gotestsum's standard-verbose and
// testname formats (which print each result too).
//
// Default output prints only failures (`--- FAIL:` lines, subtests indented) and one line per package
// (`ok  \tpkg\t0.1s`, `FAIL\tpkg\t0.1s`, `FAIL\tpkg [build failed]`), so Passed and Skipped are unknown
// unless -v output (`=== RUN`, `--- PASS:`, `--- SKIP:`) shows them.
//
// gotestsum --rerun-fails runs failed tests again (its `DONE 2 runs, …` line, or `(re-run 1)` after a
// name in the testname format, says so): then the last result of each test wins, so a test that failed
// and passed when re-run counts once, as passed. The testname format prints each result twice (go's
// `--- FAIL:` line as the test's output, then its own `FAIL TestX (0.00s)`), so it is counted the same
// way, by distinct test. Results are tracked per name for this, up to maxTracked names; past that the
// counts are the plain sum of result lines.
type goParser struct {
	c *collector

	seen    bool // some go test line since the last boundary
	verbose bool // -v lines seen: pass and skip lines are printed

	passed, failed, skipped int
	pkgFailed               int // --- FAIL lines since the last package line

	rerun    bool // gotestsum re-ran failed tests
	testname bool // gotestsum's testname format
	tracked  []goTracked
	index    map[string]int
	overflow bool // more than maxTracked names: counts are plain sums
}

// goTracked is one test's results in a section, in order of first appearance.
type goTracked struct {
	name           string
	last           string // "PASS", "FAIL" or "SKIP": the last result
	failed, passed bool   // some result was
}

// maxTracked bounds the names a goParser remembers results of.
const maxTracked = 10_000

func newGoParser(c *collector) *goParser { return &goParser{c: c} }

// see notes a go test line; the format is recognised from its first line, so Formats keeps the order
// in which runners appear.
func (p *goParser) see() {
	if !p.seen {
		p.seen = true
		p.c.recognize(FormatGo)
	}
}

func (p *goParser) line(s string) {
	if s == "" {
		return
	}
	switch s[0] {
	case ' ', '-':
		p.result(s)
	case '=':
		if strings.HasPrefix(s, "=== RUN ") {
			p.see()
			p.verbose = true
		}
	case 'o':
		// "ok  \tpkg\t0.1s": the tab tells it from TAP's "ok 1 - name".
		if rest, ok := strings.CutPrefix(s, "ok"); ok && strings.HasPrefix(strings.TrimLeft(rest, " "), "\t") {
			p.see()
			p.pkgFailed = 0
		}
	case '?':
		if strings.HasSuffix(s, "[no test files]") && strings.Contains(s, "\t") {
			p.see()
		}
	case 'F':
		if !p.testnameLine(s) {
			p.failLine(s)
		}
	case 'P', 'S':
		p.testnameLine(s)
	case 'D':
		// gotestsum's "DONE 2 runs, 6 tests, 1 skipped, 3 failures in 0.4s".
		if rest, ok := strings.CutPrefix(s, "DONE "); ok {
			n, tail, _ := strings.Cut(rest, " ")
			if runs, ok := atoi(n); ok && runs > 1 && strings.HasPrefix(tail, "runs, ") {
				p.rerun = true
			}
		}
	}
}

// testnameLine handles gotestsum's testname format: "PASS TestX (0.00s)", "FAIL TestX (re-run 1)
// (0.00s)", "SKIP TestX (0.00s)". It reports whether s was one.
func (p *goParser) testnameLine(s string) bool {
	status, rest, ok := strings.Cut(s, " ")
	if !ok || (status != "PASS" && status != "FAIL" && status != "SKIP") {
		return false
	}
	name, rest, ok := strings.Cut(rest, " (")
	if !ok || name == "" || strings.ContainsAny(name, " \t") || !strings.HasSuffix(rest, "s)") {
		return false
	}
	if strings.HasPrefix(rest, "re-run ") {
		p.rerun = true
		if _, rest, ok = strings.Cut(rest, ") ("); !ok {
			return false
		}
	}
	if _, err := strconv.ParseFloat(strings.TrimSuffix(rest, "s)"), 64); err != nil {
		return false
	}
	p.testname = true
	p.verbose = true
	p.record(name, status)
	p.see()
	return true
}

// count adds a result ("PASS", "FAIL" or "SKIP") to the counts.
func (p *goParser) count(status string) {
	switch status {
	case "PASS":
		p.passed++
	case "FAIL":
		p.failed++
	case "SKIP":
		p.skipped++
	}
}

// record notes a test's result.
func (p *goParser) record(name, status string) {
	p.count(status)
	name = truncateName(strings.TrimSpace(name))
	switch status {
	case "FAIL":
		p.c.fail(name)
	case "PASS":
		p.c.pass(name)
	}
	if i, ok := p.index[name]; ok {
		t := &p.tracked[i]
		t.last = status
		t.failed = t.failed || status == "FAIL"
		t.passed = t.passed || status == "PASS"
		return
	}
	if len(p.tracked) >= maxTracked {
		p.overflow = true // too many to remember: counts stay plain sums
		return
	}
	if p.index == nil {
		p.index = make(map[string]int)
	}
	p.index[name] = len(p.tracked)
	p.tracked = append(p.tracked, goTracked{name: name, last: status, failed: status == "FAIL", passed: status == "PASS"})
}

// result handles "--- PASS: TestX (0.00s)" lines, indented for subtests.
func (p *goParser) result(s string) {
	t := strings.TrimLeft(s, " ")
	rest, ok := strings.CutPrefix(t, "--- ")
	if !ok || len(rest) < 6 || rest[4] != ':' || rest[5] != ' ' {
		return
	}
	status := rest[:4]
	name, _, ok := strings.Cut(rest[6:], " (")
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return
	}
	switch status {
	case "PASS", "SKIP":
		p.verbose = true
	case "FAIL":
		p.pkgFailed++
	default:
		return
	}
	p.record(name, status)
	p.see()
}

// failLine handles "FAIL\tpkg\t0.1s" and "FAIL\tpkg [build failed]"; a bare "FAIL" says nothing new.
func (p *goParser) failLine(s string) {
	rest, ok := strings.CutPrefix(s, "FAIL\t")
	if !ok {
		return
	}
	pkg, _, _ := strings.Cut(rest, "\t")
	if strings.HasSuffix(pkg, " [build failed]") || strings.HasSuffix(pkg, " [setup failed]") {
		pkg, _, _ = strings.Cut(pkg, " ")
		p.c.build(pkg)
		p.see()
		p.pkgFailed = 0
		return
	}
	if pkg == "" || strings.ContainsAny(pkg, " ") {
		return
	}
	p.see()
	if p.pkgFailed == 0 {
		// The package failed but no test did: a panic in TestMain or init, a timeout, a test binary
		// that exited early. Count it as one failure so it is never lost.
		p.record(pkg, "FAIL")
	}
	p.pkgFailed = 0
}

func (p *goParser) boundary() {
	if !p.seen {
		return
	}
	// By distinct test, the last result winning, when gotestsum re-ran
	// tests or printed each result twice.
	distinct := (p.rerun || p.testname) && !p.overflow
	if distinct {
		p.passed, p.failed, p.skipped = 0, 0, 0
	}
	for _, t := range p.tracked {
		if !distinct {
			break
		}
		p.count(t.last)
		// Names were handed over as results came: take back those a
		// later result overruled.
		if t.failed && t.last != "FAIL" {
			p.c.failedNames.remove(t.name)
		}
		if t.passed && t.last != "PASS" {
			p.c.passedNames.remove(t.name)
		}
	}
	s := section{passed: unknown, failed: known(p.failed), skipped: unknown}
	if p.verbose {
		s.passed, s.skipped = known(p.passed), known(p.skipped)
	}
	p.c.add(FormatGo, s)
	*p = goParser{c: p.c}
}

// goJSONParser reads `go test -json` (test2json) events.
type goJSONParser struct {
	c *collector

	seen                    bool
	passed, failed, skipped int
	// testFailed remembers, per package still running, whether one of its tests failed, to tell a
	// package that failed by itself (counted as one failure) from one whose tests failed. Entries are
	// removed when the package ends; the map is capped against hostile input.
	testFailed map[string]bool
}

// maxOpenPackages caps goJSONParser.testFailed.
const maxOpenPackages = 4096

func newGoJSONParser(c *collector) *goJSONParser { return &goJSONParser{c: c} }

// see notes a test2json event, as goParser.see.
func (p *goJSONParser) see() {
	if !p.seen {
		p.seen = true
		p.c.recognize(FormatGoJSON)
	}
}

// goEvent is the part of a test2json event (go doc test2json) that matters here.
type goEvent struct {
	Action      string
	Package     string
	Test        string
	ImportPath  string // build-output and build-fail events
	FailedBuild string // set on a package's fail event when its build failed
}

func (p *goJSONParser) line(s string) {
	if len(s) < 2 || s[0] != '{' || !strings.Contains(s, `"Action"`) {
		return
	}
	var ev goEvent
	if json.Unmarshal([]byte(s), &ev) != nil {
		return
	}
	switch ev.Action {
	case "start", "run", "pause", "cont", "output", "bench", "build-output":
		if ev.Package != "" || ev.ImportPath != "" {
			p.see()
		}
	case "build-fail":
		p.see()
		p.c.build("")
	case "pass", "fail", "skip":
		p.see()
		if ev.Test != "" {
			p.test(ev)
		} else {
			p.pkg(ev)
		}
	}
}

func (p *goJSONParser) test(ev goEvent) {
	switch ev.Action {
	case "pass":
		p.passed++
		p.c.pass(ev.Test)
	case "fail":
		p.failed++
		p.c.fail(ev.Test)
		if p.testFailed == nil {
			p.testFailed = make(map[string]bool)
		}
		if len(p.testFailed) < maxOpenPackages {
			p.testFailed[ev.Package] = true
		}
	case "skip":
		p.skipped++
	}
}

func (p *goJSONParser) pkg(ev goEvent) {
	hadTestFailure := p.testFailed[ev.Package]
	delete(p.testFailed, ev.Package)
	if ev.Action != "fail" {
		return
	}
	switch {
	case ev.FailedBuild != "":
		p.c.build(ev.Package)
	case !hadTestFailure:
		// As in goParser.failLine: a package failure that no test accounts for.
		p.failed++
		p.c.fail(ev.Package)
	}
}

func (p *goJSONParser) boundary() {
	if !p.seen {
		return
	}
	p.c.add(FormatGoJSON, section{passed: known(p.passed), failed: known(p.failed), skipped: known(p.skipped)})
	*p = goJSONParser{c: p.c}
}
