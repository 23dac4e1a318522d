package testreport

import (
	"strings"
)

// pytestParser reads pytest console output: the final counts line (`=== 3 failed, 6 passed in 0.1s ===`,
// undecorated with -q), the short test summary (`FAILED path::name - msg`, `ERROR path::name`, and
// `PASSED path::name` with -rA) and -v result lines (`path::name PASSED [ 50%]`).
//
// Counting: passed = passed + xpassed; failed = failed + errors that are not collection errors (a fixture
// error belongs to a test); skipped = skipped + xfailed. A collection error (`ERROR collecting path`, or a
// short-summary `ERROR path` without "::") sets BuildFailed: the module's tests never ran.
type pytestParser struct {
	c *collector

	active   bool // pytest lines since the last summary
	collErrs nameSet
}

func newPytestParser(c *collector) *pytestParser { return &pytestParser{c: c} }

// see notes a pytest line, as goParser.see.
func (p *pytestParser) see() {
	if !p.active {
		p.active = true
		p.c.recognize(FormatPytest)
	}
}

func (p *pytestParser) line(s string) {
	if s == "" {
		return
	}
	switch c := s[0]; {
	case c == '=':
		if strings.Contains(s, " test session starts ") {
			p.see()
			return
		}
		p.summary(s)
	case c == '_':
		// "_____ ERROR collecting tests/test_x.py _____"
		if i := strings.Index(s, " ERROR collecting "); i >= 0 {
			path := strings.TrimRight(s[i+len(" ERROR collecting "):], "_ ")
			p.collErrs.add(path)
			p.c.build(path)
			p.see()
		}
	case c >= '0' && c <= '9' || c == 'n':
		p.summary(s) // -q prints the counts line undecorated; "no tests ran in 0.01s"
	case c >= 'A' && c <= 'Z':
		if !p.shortSummary(s) {
			p.verbose(s)
		}
	default:
		p.verbose(s)
	}
}

// pytestStatuses are the outcomes pytest prints, in -v lines and in the short summary.
var pytestStatuses = []string{"PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"}

// shortSummary handles "FAILED tests/x.py::test_y - msg", "PASSED tests/x.py::test_y",
// "ERROR tests/x.py::test_y - msg" and a collection error "ERROR tests/x.py".
func (p *pytestParser) shortSummary(s string) bool {
	status, rest, ok := strings.Cut(s, " ")
	if !ok {
		return false
	}
	switch status {
	case "PASSED", "FAILED", "ERROR", "XPASS", "XFAIL", "SKIPPED":
	default:
		return false
	}
	// The node id ends where pytest's " - message" begins.
	id, _, _ := strings.Cut(rest, " - ")
	id = strings.TrimSpace(id)
	if !strings.Contains(id, "::") {
		if status == "ERROR" && looksLikePath(id) {
			p.collErrs.add(id)
			p.c.build(id)
			p.see()
			return true
		}
		return status == "SKIPPED" // "SKIPPED [1] tests/x.py:21: reason" names no test
	}
	p.record(status, id)
	return true
}

// verbose handles -v lines: "tests/x.py::test_y PASSED          [ 50%]", optionally with a reason in
// parentheses after the status, and xdist's "[gw0] [ 50%] PASSED tests/x.py::test_y".
func (p *pytestParser) verbose(s string) {
	if !strings.Contains(s, "::") {
		return
	}
	if strings.HasPrefix(s, "[gw") {
		_, rest, _ := strings.Cut(s, "] [")
		_, rest, _ = strings.Cut(rest, "] ")
		p.shortSummary(rest)
		return
	}
	if s[0] == ' ' {
		return
	}
	t := strings.TrimRight(s, " ")
	if strings.HasSuffix(t, "%]") {
		if i := strings.LastIndex(t, "["); i > 0 {
			t = strings.TrimRight(t[:i], " ")
		}
	}
	for _, st := range pytestStatuses {
		i := strings.LastIndex(t, " "+st)
		if i <= 0 {
			continue
		}
		after := t[i+1+len(st):]
		if after != "" && !strings.HasPrefix(after, " (") {
			continue
		}
		id := t[:i]
		if first, _, _ := strings.Cut(id, "::"); strings.Contains(first, " ") {
			return
		}
		p.record(st, id)
		return
	}
}

func (p *pytestParser) record(status, id string) {
	p.see()
	switch status {
	case "PASSED", "XPASS":
		p.c.pass(id)
	case "FAILED", "ERROR":
		p.c.fail(id)
	}
}

// summary handles the counts line, "3 failed, 6 passed, 1 skipped, 1 xfailed, 1 error in 0.04s", with or
// without "=" decoration; anything else is ignored.
func (p *pytestParser) summary(s string) {
	t := strings.Trim(s, "= ")
	i := strings.LastIndex(t, " in ")
	if i < 0 || !pytestDuration(t[i+4:]) {
		return
	}
	t = t[:i]
	var passed, failed, skipped, errs int
	if t != "no tests ran" {
		for part := range strings.SplitSeq(t, ", ") {
			num, word, ok := strings.Cut(part, " ")
			n, okN := atoi(num)
			if !ok || !okN {
				return
			}
			switch word {
			case "passed", "xpassed":
				passed += n
			case "failed":
				failed += n
			case "skipped", "xfailed":
				skipped += n
			case "error", "errors":
				errs += n
			case "deselected", "warning", "warnings", "rerun":
			default:
				return
			}
		}
	}
	collErrs := len(p.collErrs.list)
	p.c.add(FormatPytest, section{
		passed:  known(passed),
		failed:  known(failed + max(errs-collErrs, 0)),
		skipped: known(skipped),
	})
	p.active = false
	p.collErrs = nameSet{}
}

// pytestDuration matches the end of a counts line: "0.04s", "12.31s (0:00:12)".
func pytestDuration(s string) bool {
	num, rest, ok := strings.Cut(s, "s")
	if !ok || num == "" {
		return false
	}
	for _, r := range num {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	rest = strings.TrimSpace(rest)
	return rest == "" || strings.HasPrefix(rest, "(") && strings.HasSuffix(rest, ")")
}

// looksLikePath reports whether s could be a pytest collection path ("tests/test_x.py", "test_x.py").
func looksLikePath(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t") && (strings.HasSuffix(s, ".py") || strings.Contains(s, "/"))
}

func (p *pytestParser) boundary() {
	if p.active {
		// A pytest run without its counts line (killed, truncated): names, but no counts.
		p.c.add(FormatPytest, section{passed: unknown, failed: unknown, skipped: unknown})
	}
	*p = pytestParser{c: p.c}
}
