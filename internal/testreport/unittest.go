package testreport

import (
	"strings"
)

// unittestParser reads Python unittest output (`python -m unittest`, default or -v; Django's test
// runner prints the same): the `Ran 8 tests in 0.001s` line and the result line after it (`OK`,
// `OK (skipped=1)`, `FAILED (failures=2, errors=1, skipped=1, expected failures=1)`), the `FAIL: name
// (id)` and `ERROR: name (id)` headers of the failure report, and with -v the `name (id) ... ok` lines.
//
// Names are test ids as `python -m unittest` takes them ("tests.test_calc.TestAdd.test_add"); a failing
// subtest counts for its test. Counting: failed = distinct failing tests (a test whose subtests fail twice
// is one) + unexpected successes; skipped = skipped + expected failures; passed = the rest of the tests
// that ran. A module that fails to import (unittest.loader._FailedTest) sets BuildFailed and is not
// counted as a test.
type unittestParser struct {
	c *collector

	active    bool
	afterRan  bool // the "Ran N tests" line was just seen: the result line follows
	ran       int
	failing   map[string]bool // distinct failing test ids of this section
	loadFails map[string]bool // modules that failed to import
	overflow  bool            // more than maxTracked failing ids: counts come from the summary alone
}

func newUnittestParser(c *collector) *unittestParser { return &unittestParser{c: c} }

func (p *unittestParser) see() {
	if !p.active {
		p.active = true
		p.c.recognize(FormatUnittest)
	}
}

// loaderPrefix marks the pseudo-test unittest reports for a module it could not import.
const loaderPrefix = "unittest.loader._FailedTest."

func (p *unittestParser) line(s string) {
	if p.afterRan {
		if s == "" {
			return
		}
		p.afterRan = false
		if p.result(s) {
			return
		}
	}
	switch {
	case strings.HasPrefix(s, "Ran "):
		// "Ran 8 tests in 0.001s", "Ran 1 test in 0.000s"
		f := strings.Fields(s)
		if len(f) == 5 && (f[2] == "tests" || f[2] == "test") && f[3] == "in" && strings.HasSuffix(f[4], "s") {
			if n, ok := atoi(f[1]); ok {
				p.ran, p.afterRan = n, true
				p.see()
			}
		}
	case strings.HasPrefix(s, "FAIL: "), strings.HasPrefix(s, "ERROR: "):
		_, desc, _ := strings.Cut(s, ": ")
		if id, ok := unittestID(desc); ok {
			p.failed(id)
		}
	case strings.HasSuffix(s, " ... ok"):
		if id, ok := unittestID(strings.TrimSuffix(s, " ... ok")); ok {
			p.c.pass(id)
		}
	case strings.HasSuffix(s, " ... FAIL"), strings.HasSuffix(s, " ... ERROR"):
		desc := s[:strings.LastIndex(s, " ... ")]
		if id, ok := unittestID(desc); ok {
			p.failed(id)
		}
	case strings.HasSuffix(s, " ... unexpected success"):
		// Counted from the result line; named here (only -v names them).
		if id, ok := unittestID(strings.TrimSuffix(s, " ... unexpected success")); ok {
			p.c.fail(id)
		}
	}
}

// failed records a failing test, or a module that could not be imported.
func (p *unittestParser) failed(id string) {
	if mod, ok := strings.CutPrefix(id, loaderPrefix); ok {
		if p.loadFails == nil {
			p.loadFails = map[string]bool{}
		}
		if !p.loadFails[mod] && len(p.loadFails) < maxTracked {
			p.loadFails[mod] = true
			p.c.build(mod)
		}
		return
	}
	p.c.fail(id)
	if p.failing == nil {
		p.failing = map[string]bool{}
	}
	if len(p.failing) >= maxTracked && !p.failing[id] {
		p.overflow = true
		return
	}
	p.failing[id] = true
}

// result reads the line after "Ran N tests" and closes the section; it reports whether it was one.
func (p *unittestParser) result(s string) bool {
	var counts string
	switch {
	case s == "OK", s == "FAILED", s == "NO TESTS RAN":
	case strings.HasPrefix(s, "OK (") && strings.HasSuffix(s, ")"):
		counts = s[len("OK (") : len(s)-1]
	case strings.HasPrefix(s, "FAILED (") && strings.HasSuffix(s, ")"):
		counts = s[len("FAILED (") : len(s)-1]
	default:
		return false
	}
	kv := map[string]int{}
	if counts != "" {
		for part := range strings.SplitSeq(counts, ", ") {
			k, v, ok := strings.Cut(part, "=")
			n, okN := atoi(v)
			if !ok || !okN {
				return false
			}
			kv[k] = n
		}
	}
	loadFails := len(p.loadFails)
	failed := len(p.failing)
	if p.overflow {
		failed = max(kv["failures"]+kv["errors"]-loadFails, 0)
	}
	failed += kv["unexpected successes"]
	skipped := kv["skipped"] + kv["expected failures"]
	passed := max(p.ran-loadFails-failed-skipped, 0)
	p.c.add(FormatUnittest, section{passed: known(passed), failed: known(failed), skipped: known(skipped)})
	*p = unittestParser{c: p.c, active: true}
	return true
}

// unittestID turns a test's description into its id: "test_add (tests.test_calc.TestAdd.test_add)"
// (Python 3.11+), "test_add (tests.test_calc.TestAdd)" (older), with a subtest's " (n=2)" after it, and
// an optional first line of the docstring after that on -v lines.
func unittestID(desc string) (string, bool) {
	method, rest, ok := strings.Cut(desc, " (")
	if !ok || method == "" || strings.ContainsAny(method, " \t") {
		return "", false
	}
	inner, _, ok := strings.Cut(rest, ")")
	if !ok || inner == "" || strings.ContainsAny(inner, " \t") || !strings.Contains(inner, ".") {
		return "", false
	}
	if strings.HasSuffix(inner, "."+method) || strings.HasPrefix(inner, loaderPrefix) {
		return inner, true
	}
	return inner + "." + method, true
}

func (p *unittestParser) boundary() {
	// A section ends with its result line; one cut short (the runner was killed) has no counts.
	p.afterRan = false
	p.failing, p.loadFails, p.overflow = nil, nil, false
}
