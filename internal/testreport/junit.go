package testreport

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// ParseJUnit reads a JUnit XML report (<testsuites>/<testsuite>/<testcase> with <failure>, <error> or
// <skipped> children), streaming it with encoding/xml's Token so a large report is never held whole;
// text longer than 64 KiB in one element or attribute (a huge <system-out>) is cut before it reaches
// the decoder.
//
// The <testcase> elements are the truth; an <error> counts as failed (the test did not pass), a
// <skipped> as skipped. A <testsuite> without any <testcase> child contributes its tests, failures,
// errors and skipped attributes instead (some producers write only totals). Names are "classname.name"
// (the usual JUnit full name, e.g. pytest's "tests.test_calc.TestStrings.test_lower" and mocha xunit's
// "math mul.mul(2, 2) = 5"), or just "name" when classname is empty, equals name or already begins it
// (jest-junit repeats it), or is a source file name (vitest's "math.test.js").
//
// A report that is not XML or holds no <testsuite> or <testcase> is an error; a report cut off midway
// returns what was read along with the error.
func ParseJUnit(r io.Reader) (Result, error) {
	c := newCollector()
	dec := xml.NewDecoder(newCapText(r, maxXMLText))
	dec.Strict = false
	var (
		st       junitState
		sawSuite bool
	)
	for {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			st.flush(c)
			return junitResult(c, sawSuite), fmt.Errorf("read junit report: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "testsuite":
				sawSuite = true
				st.startSuite(t)
			case "testcase":
				sawSuite = true
				st.startCase(t)
			case "failure", "error":
				if st.inCase {
					st.caseFailed = true
				}
			case "skipped":
				if st.inCase {
					st.caseSkipped = true
				}
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "testcase":
				st.endCase(c)
			case "testsuite":
				st.endSuite(c)
			}
		}
	}
	st.flush(c)
	if !sawSuite {
		return Result{}, errors.New("read junit report: no testsuite or testcase element")
	}
	return junitResult(c, sawSuite), nil
}

// junitState follows the report's nesting.
type junitState struct {
	// suites is the stack of open <testsuite> elements (they nest in some producers' output).
	suites []junitSuite

	inCase                  bool
	caseName                string
	caseFailed, caseSkipped bool
	passed, failed, skipped int
}

// junitSuite is an open <testsuite>: its attributes, used only when it has no <testcase>.
type junitSuite struct {
	cases                  int
	tests, failed, skipped int
	hasCounts              bool
}

// maxJUnitDepth caps the suite stack against hostile nesting.
const maxJUnitDepth = 64

func (s *junitState) startSuite(t xml.StartElement) {
	var su junitSuite
	for _, a := range t.Attr {
		n, err := strconv.Atoi(strings.TrimSpace(a.Value))
		if err != nil || n < 0 {
			continue
		}
		switch a.Name.Local {
		case "tests":
			su.tests, su.hasCounts = n, true
		case "failures", "errors":
			su.failed += n
		case "skipped", "skip":
			su.skipped += n
		}
	}
	if len(s.suites) < maxJUnitDepth {
		s.suites = append(s.suites, su)
	}
}

func (s *junitState) endSuite(c *collector) {
	if len(s.suites) == 0 {
		return
	}
	su := s.suites[len(s.suites)-1]
	s.suites = s.suites[:len(s.suites)-1]
	if su.cases > 0 {
		// Its cases are counted; the enclosing suite (if any) has cases too.
		if n := len(s.suites); n > 0 {
			s.suites[n-1].cases += su.cases
		}
		return
	}
	if su.hasCounts {
		failed := min(su.failed, su.tests)
		skipped := min(su.skipped, su.tests-failed)
		s.passed += su.tests - failed - skipped
		s.failed += failed
		s.skipped += skipped
		if n := len(s.suites); n > 0 {
			s.suites[n-1].cases += su.tests // so the enclosing suite's totals are not added again
		}
	}
}

func (s *junitState) startCase(t xml.StartElement) {
	var name, class string
	for _, a := range t.Attr {
		switch a.Name.Local {
		case "name":
			name = strings.TrimSpace(a.Value)
		case "classname":
			class = strings.TrimSpace(a.Value)
		}
	}
	s.inCase, s.caseFailed, s.caseSkipped = true, false, false
	s.caseName = junitName(class, name)
}

func (s *junitState) endCase(c *collector) {
	if !s.inCase {
		return
	}
	s.inCase = false
	if n := len(s.suites); n > 0 {
		s.suites[n-1].cases++
	}
	switch {
	case s.caseFailed:
		s.failed++
		c.fail(s.caseName)
	case s.caseSkipped:
		s.skipped++
	default:
		s.passed++
		c.pass(s.caseName)
	}
}

// flush closes what a truncated report left open.
func (s *junitState) flush(c *collector) {
	s.endCase(c)
	for len(s.suites) > 0 {
		s.endSuite(c)
	}
	c.add(FormatJUnit, section{passed: known(s.passed), failed: known(s.failed), skipped: known(s.skipped)})
	*s = junitState{}
}

func junitResult(c *collector, sawSuite bool) Result {
	if !sawSuite {
		return Result{}
	}
	return c.result()
}

// junitName builds a test's name from its classname and name attributes (see ParseJUnit).
func junitName(class, name string) string {
	switch {
	case class == "" || class == name || strings.HasPrefix(name, class) || looksLikeSourceFile(class) ||
		strings.HasSuffix(class, ".py"):
		return name
	case name == "":
		return class
	}
	return class + "." + name
}

// WithReport combines a console result with the result of the JUnit report the same step wrote
// (ParseJUnit of the file `verify_report` names): the report's counts and names are the authority, since
// it is written for machines, but a build failure seen on the console is kept, because a report left by
// an earlier run survives a compile error that stopped this one from writing its own. If the report
// recognised nothing, the console result stands.
func (r Result) WithReport(report Result) Result {
	if !report.Recognized() {
		return r
	}
	out := report
	out.Formats = slices.Clone(report.Formats)
	for _, f := range r.Formats {
		if !slices.Contains(out.Formats, f) {
			out.Formats = append(out.Formats, f)
		}
	}
	if r.BuildFailed {
		out.BuildFailed = true
		var bf nameSet
		for _, n := range slices.Concat(report.BuildFailures, r.BuildFailures) {
			bf.add(n)
		}
		out.BuildFailures = bf.list
	}
	return out
}

// maxXMLText caps each run of character data, CDATA section, comment and attribute value that
// ParseJUnit hands to encoding/xml, which would otherwise hold a whole <system-out> in memory.
const maxXMLText = 64 << 10

// xmlState is where capText is in the markup.
type xmlState int

const (
	xmlText    xmlState = iota // character data
	xmlTag                     // between "<" and ">"
	xmlQuote                   // inside a quoted attribute value
	xmlComment                 // inside "<!--" … "-->"
	xmlCDATA                   // inside "<![CDATA[" … "]]>"
)

// capText passes XML through unchanged except that it keeps at most limit bytes of any one run of
// character data, CDATA, comment or attribute value, so that no token can grow with the input. It cuts
// only before an ASCII byte outside an entity, so what it keeps stays valid UTF-8 and valid XML.
type capText struct {
	r     io.Reader
	limit int
	in    []byte
	out   []byte // filtered bytes not yet returned
	buf   []byte // backing store of out
	err   error

	state    xmlState
	prefix   []byte // the first bytes of a tag, to recognise "<!--" and "<![CDATA["
	quote    byte
	run      int  // bytes kept of the current run
	dropping bool // the current run is past its cap
	entity   int  // >0 while inside "&…;"
	match    int  // bytes of the "-->" or "]]>" terminator seen and held back
}

func newCapText(r io.Reader, limit int) *capText {
	return &capText{r: r, limit: limit, in: make([]byte, 32<<10)}
}

func (c *capText) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		n, err := c.r.Read(c.in)
		c.buf = c.buf[:0]
		for _, x := range c.in[:n] {
			c.filter(x)
		}
		if err != nil {
			c.flushHeld() // a section cut off inside its terminator: the held bytes were content
		}
		c.out, c.err = c.buf, err
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

func (c *capText) filter(x byte) {
	switch c.state {
	case xmlText:
		if x == '<' {
			c.buf = append(c.buf, x)
			c.state, c.prefix = xmlTag, c.prefix[:0]
			return
		}
		c.content(x)
	case xmlTag:
		c.buf = append(c.buf, x)
		if len(c.prefix) < 8 {
			c.prefix = append(c.prefix, x)
		}
		switch {
		case string(c.prefix) == "!--":
			c.enter(xmlComment)
		case string(c.prefix) == "![CDATA[":
			c.enter(xmlCDATA)
		case x == '"' || x == '\'':
			c.quote = x
			c.enter(xmlQuote)
		case x == '>':
			c.enter(xmlText)
		}
	case xmlQuote:
		if x == c.quote {
			c.buf = append(c.buf, x)
			c.state = xmlTag
			c.prefix = append(c.prefix[:0], "--------"...) // no longer a tag's first bytes
			return
		}
		c.content(x)
	case xmlComment:
		c.terminated(x, '-', "-->")
	case xmlCDATA:
		c.terminated(x, ']', "]]>")
	}
}

// enter starts a new run in state s.
func (c *capText) enter(s xmlState) {
	c.state, c.run, c.dropping, c.entity, c.match = s, 0, false, 0, 0
}

// terminated handles a byte of a comment or CDATA section, whose terminator is a, a, '>' ("-->",
// "]]>"): terminator bytes are held back until it is clear whether they end the section.
func (c *capText) terminated(x, a byte, term string) {
	switch {
	case x == a && c.match < 2:
		c.match++
	case x == a: // "]]]": the first ']' was content
		c.content(a)
	case x == '>' && c.match == 2:
		c.buf = append(c.buf, term...)
		c.enter(xmlText)
	default:
		c.flushHeld()
		c.content(x)
	}
}

// flushHeld emits the terminator bytes held back in a comment or CDATA section as content.
func (c *capText) flushHeld() {
	a := byte('-')
	if c.state == xmlCDATA {
		a = ']'
	}
	for range c.match {
		c.content(a)
	}
	c.match = 0
}

// content keeps or drops one byte of a run.
func (c *capText) content(x byte) {
	if c.dropping {
		return
	}
	if c.run >= c.limit && x < 0x80 && c.entity == 0 {
		c.dropping = true
		return
	}
	switch {
	case x == '&' && c.state != xmlCDATA && c.state != xmlComment:
		c.entity = 1
	case x == ';' || c.entity > 16:
		c.entity = 0
	case c.entity > 0:
		c.entity++
	}
	c.buf = append(c.buf, x)
	c.run++
}
