package testreport

import (
	"strings"
	"unicode/utf8"
)

// jsMode is which JavaScript runner's header was seen last.
type jsMode int

const (
	jsNone   jsMode = iota // no header: mocha has none
	jsJest                 // "PASS ./x.test.js" / "FAIL ./x.test.js"
	jsVitest               // " RUN  v3.2.7 /path"
	jsNode                 // "▶ suite"
)

// format is the Format of a run that started with mode's header.
func (m jsMode) format() Format {
	switch m {
	case jsJest:
		return FormatJest
	case jsVitest:
		return FormatVitest
	case jsNode:
		return FormatNodeTest
	}
	return FormatMocha
}

// jsFrame is one describe/suite level of the tree the spec-style reporters print.
type jsFrame struct {
	indent      int
	title       string
	explicit    bool // node's "▶ title": closed by a result line with the same title and indent
	childFailed bool
}

// maxJSDepth caps the describe stack.
const maxJSDepth = 64

// jsParser reads jest, vitest, mocha (spec) and node --test (spec) output.
//
// Jest, mocha and node print a tree: describe titles, then result lines marked ✓/✔ (pass), ✕/✖/"N)"
// (fail), ○/✎/-/﹣ (skip, todo), indented under them; the parser rebuilds "describe > test" names from the
// indentation. Vitest prints flat "✓ file > describe > test 3ms" lines. Marks are shared between runners,
// so names are held back (pendingNames) until a summary line — jest "Tests:", vitest " Tests ", mocha
// "N passing", node "ℹ tests" — says which runner printed them.
type jsParser struct {
	c *collector

	mode      jsMode
	suspended bool // after a summary: the failure list repeats names, so marks are not results
	stack     []jsFrame
	pending   pendingNames
	headed    bool // a jest/vitest/node header since the last summary: the run is recognised

	jestFile          string // the last "FAIL file" header, for "● Test suite failed to run"
	jestSuitesFailed  int
	vitestFilesFailed int

	mocha summaryAcc // "N passing" … "N failing"
	node  summaryAcc // "ℹ tests N" … "ℹ duration_ms"
}

// summaryAcc collects a summary spread over several lines.
type summaryAcc struct {
	open                    bool
	passed, failed, skipped int
}

func newJSParser(c *collector) *jsParser { return &jsParser{c: c} }

func (p *jsParser) line(s string) {
	t := strings.TrimLeft(s, " ")
	if t == "" {
		return
	}
	ind := len(s) - len(t)
	if p.mocha.open {
		if p.mochaSummary(t) {
			return
		}
		p.closeMocha()
	}
	if p.node.open && !strings.HasPrefix(t, "ℹ ") {
		p.closeNode()
	}
	if p.summaryOrHeader(s, t, ind) {
		return
	}
	r, size := utf8.DecodeRuneInString(t)
	rest := t[size:]
	switch r {
	case '✓', '✔':
		p.result(ind, rest, markPass)
	case '✕', '✖', '×':
		p.result(ind, rest, markFail)
	case '○', '✎', '﹣', '↓':
		p.result(ind, rest, markSkip)
	case '-':
		if strings.HasPrefix(rest, " ") && p.mode == jsNone {
			p.result(ind, rest, markSkip)
			return
		}
		p.suite(ind, t)
	case '▶':
		if title, ok := strings.CutPrefix(rest, " "); ok && title != "" {
			p.mode, p.suspended, p.headed = jsNode, false, true
			p.c.recognize(FormatNodeTest)
			p.push(jsFrame{indent: ind, title: title, explicit: true})
		}
	case '●':
		p.jestBullet(strings.TrimPrefix(rest, " "))
	default:
		if r >= '0' && r <= '9' {
			// mocha's "1) title" failure mark.
			if i := strings.Index(t, ") "); i > 0 && i <= 4 && allDigits(t[:i]) && p.mode == jsNone {
				p.result(ind, " "+t[i+2:], markFail)
				return
			}
		}
		p.suite(ind, t)
	}
}

// summaryOrHeader handles the lines that end or start a run; it reports whether s was one.
func (p *jsParser) summaryOrHeader(s, t string, ind int) bool {
	switch {
	case strings.HasPrefix(s, "Tests:"):
		return p.jestTests(strings.TrimPrefix(s, "Tests:"))
	case strings.HasPrefix(s, "Test Suites:"):
		counts := strings.TrimPrefix(s, "Test Suites:")
		if _, ok := countWord(counts, ", ", "total"); !ok {
			return false
		}
		p.jestSuitesFailed, _ = countWord(counts, ", ", "failed")
		p.mode, p.headed = jsJest, true
		p.c.recognize(FormatJest)
		return true
	case ind <= 1 && (strings.HasPrefix(t, "PASS ") || strings.HasPrefix(t, "FAIL ")):
		return p.fileHeader(t)
	case strings.HasPrefix(t, "RUN  v") || strings.HasPrefix(t, "RUN v"):
		p.startRun(jsVitest)
		return true
	case strings.HasPrefix(t, "Test Files ") && p.mode == jsVitest:
		if f, ok := countWord(vitestCounts(t[len("Test Files "):]), " | ", "failed"); ok {
			p.vitestFilesFailed = f
		}
		return true
	case strings.HasPrefix(t, "Tests ") && strings.HasSuffix(t, ")"):
		return p.vitestTests(t[len("Tests "):])
	case strings.HasPrefix(t, "Tests  no tests") && p.mode == jsVitest:
		if p.vitestFilesFailed > 0 {
			p.c.build("")
		}
		p.closeRun(FormatVitest, section{passed: known(0), failed: known(0), skipped: known(0)})
		return true
	case strings.HasPrefix(t, "Errors ") && p.mode == jsVitest:
		// Vitest's unhandled errors fail the run even when every test passed.
		if n, ok := countWord(vitestCounts(t[len("Errors "):]), " | ", "error"); ok && n > 0 {
			p.c.build("")
		} else if n, ok := countWord(vitestCounts(t[len("Errors "):]), " | ", "errors"); ok && n > 0 {
			p.c.build("")
		}
		return true
	case strings.HasPrefix(t, "ℹ "):
		return p.nodeSummary(t[len("ℹ "):])
	case t == "✖ failing tests:":
		p.suspended = true
		return true
	}
	return p.mochaSummary(t)
}

// startRun resets the tree for a new run of mode.
func (p *jsParser) startRun(mode jsMode) {
	p.mode, p.suspended, p.headed = mode, false, true
	p.c.recognize(mode.format())
	p.stack = p.stack[:0]
}

// fileHeader handles jest's "PASS ./x.test.js" / "FAIL ./x.test.js (5.1 s)" and vitest's
// "FAIL  x.test.js > describe > test" / "FAIL  x.test.js [ x.test.js ]".
func (p *jsParser) fileHeader(t string) bool {
	status, rest, _ := strings.Cut(t, " ")
	rest = strings.TrimLeft(rest, " ")
	if rest == "" || strings.ContainsRune(rest, '\t') {
		return false
	}
	if p.mode == jsVitest && !p.suspended || strings.Contains(rest, " > ") || strings.HasSuffix(rest, " ]") {
		// Vitest's failure headers; outside a vitest run they are someone else's lines.
		if status != "FAIL" || p.mode != jsVitest {
			return false
		}
		if file, _, ok := strings.Cut(rest, " [ "); ok {
			p.c.build(file) // the file failed to load: its tests never ran
		} else {
			p.pending.fail(stripFilePrefix(rest))
		}
		return true
	}
	file, _, _ := strings.Cut(rest, " (")
	if !looksLikeSourceFile(file) {
		return false
	}
	if p.mode != jsJest || p.suspended {
		p.startRun(jsJest)
	}
	p.stack = p.stack[:0]
	p.jestFile = strings.Clone(file)
	return true
}

// jestBullet handles jest's "● describe › test" failure headers.
func (p *jsParser) jestBullet(title string) {
	if p.mode != jsJest || title == "" {
		return
	}
	switch title {
	case "Test suite failed to run":
		p.c.build(p.jestFile)
	case "Console":
	default:
		p.pending.fail(strings.ReplaceAll(title, " › ", " > "))
	}
}

// jestTests handles "Tests:       2 failed, 1 skipped, 1 todo, 6 passed, 10 total".
func (p *jsParser) jestTests(s string) bool {
	passed, failed, skipped, ok := jsTally(strings.TrimSpace(s), ", ", true)
	if !ok {
		return false
	}
	if p.jestSuitesFailed > 0 && failed == 0 {
		p.c.build("") // a suite failed without a failing test: it did not run
	}
	p.mode = jsJest
	p.closeRun(FormatJest, section{passed: known(passed), failed: known(failed), skipped: known(skipped)})
	return true
}

// vitestTests handles vitest's "Tests  2 failed | 6 passed | 1 skipped | 1 todo (10)".
func (p *jsParser) vitestTests(s string) bool {
	passed, failed, skipped, ok := jsTally(vitestCounts(s), " | ", false)
	if !ok {
		return false
	}
	if p.vitestFilesFailed > 0 && failed == 0 {
		p.c.build("")
	}
	p.mode = jsVitest
	p.closeRun(FormatVitest, section{passed: known(passed), failed: known(failed), skipped: known(skipped)})
	return true
}

// jsTally adds up the sep-separated "N word" parts of a jest or vitest
// Tests line (todo counts as skipped; "N total", when total, is read and
// ignored). ok is false when any part is something else: not a counts line.
func jsTally(s, sep string, total bool) (passed, failed, skipped int, ok bool) {
	for part := range strings.SplitSeq(s, sep) {
		num, word, cut := strings.Cut(part, " ")
		n, isNum := atoi(num)
		if !cut || !isNum {
			return 0, 0, 0, false
		}
		switch {
		case word == "passed":
			passed += n
		case word == "failed":
			failed += n
		case word == "skipped" || word == "todo":
			skipped += n
		case word == "total" && total:
		default:
			return 0, 0, 0, false
		}
	}
	return passed, failed, skipped, true
}

// vitestCounts trims vitest's " (10)" total from a counts line.
func vitestCounts(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, " ("); i >= 0 && strings.HasSuffix(s, ")") {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// countWord finds "N word" among sep-separated parts.
func countWord(s, sep, word string) (int, bool) {
	for part := range strings.SplitSeq(strings.TrimSpace(s), sep) {
		num, w, ok := strings.Cut(strings.TrimSpace(part), " ")
		if ok && w == word {
			return atoi(num)
		}
	}
	return 0, false
}

// mochaSummary handles "6 passing (6ms)", "2 pending" and "2 failing".
func (p *jsParser) mochaSummary(t string) bool {
	num, word, ok := strings.Cut(t, " ")
	if !ok {
		return false
	}
	n, ok := atoi(num)
	if !ok {
		return false
	}
	switch {
	case strings.HasPrefix(word, "passing (") && strings.HasSuffix(word, ")"):
		if p.mocha.open {
			p.closeMocha()
		}
		p.mocha = summaryAcc{open: true, passed: n}
	case word == "failing" && p.mocha.open:
		p.mocha.failed = n
	case word == "pending" && p.mocha.open:
		p.mocha.skipped = n
	default:
		return false
	}
	return true
}

func (p *jsParser) closeMocha() {
	m := p.mocha
	p.mocha = summaryAcc{}
	p.mode = jsNone
	p.closeRun(FormatMocha, section{passed: known(m.passed), failed: known(m.failed), skipped: known(m.skipped)})
}

// nodeSummary handles node's "ℹ tests 13", "ℹ pass 7", … "ℹ duration_ms 268.2".
func (p *jsParser) nodeSummary(s string) bool {
	key, val, ok := strings.Cut(s, " ")
	if !ok {
		return false
	}
	if key == "duration_ms" && p.node.open {
		p.closeNode()
		return true
	}
	n, ok := atoi(val)
	if !ok {
		return false
	}
	switch key {
	case "tests":
		if p.node.open {
			p.closeNode()
		}
		p.node = summaryAcc{open: true}
	case "pass":
		p.node.passed = n
	case "fail", "cancelled":
		p.node.failed += n
	case "skipped", "todo":
		p.node.skipped += n
	case "suites":
	default:
		return false
	}
	return p.node.open
}

func (p *jsParser) closeNode() {
	n := p.node
	p.node = summaryAcc{}
	p.mode = jsNode
	p.closeRun(FormatNodeTest, section{passed: known(n.passed), failed: known(n.failed), skipped: known(n.skipped)})
}

// closeRun ends a run with its summary: the held names are now known to be f's.
func (p *jsParser) closeRun(f Format, s section) {
	p.c.add(f, s)
	p.pending.flush(p.c)
	p.suspended, p.headed = true, false
	p.jestSuitesFailed, p.vitestFilesFailed = 0, 0
	p.stack = p.stack[:0]
}

// jsMark is the outcome a result line's mark stands for.
type jsMark int

const (
	markPass jsMark = iota
	markFail
	markSkip
)

// result handles a marked line; rest is the text after the mark.
func (p *jsParser) result(ind int, rest string, mark jsMark) {
	title, ok := strings.CutPrefix(rest, " ")
	if !ok {
		return
	}
	if p.suspended {
		if mark != markPass {
			return
		}
		// A new run of a header-less runner (mocha, or node with only top-level tests) started; jest
		// and vitest runs start with a header instead.
		p.suspended, p.mode = false, jsNone
	}
	title = strings.TrimSpace(title)
	if p.mode == jsVitest {
		p.vitestResult(title, mark)
		return
	}
	title, todo := cleanJSTitle(title)
	if todo && mark == markPass {
		mark = markSkip
	}
	if title == "" {
		return
	}
	for len(p.stack) > 0 && p.stack[len(p.stack)-1].indent > ind {
		p.stack = p.stack[:len(p.stack)-1]
	}
	if n := len(p.stack); n > 0 && p.stack[n-1].indent == ind {
		top := p.stack[n-1]
		p.stack = p.stack[:n-1]
		if top.explicit && top.title == title {
			// node's closing line of a suite or of a test with subtests: a failure that its children
			// do not explain is its own.
			if mark == markFail {
				if !top.childFailed {
					p.pending.fail(p.path(title))
				}
				p.markAncestorsFailed()
			}
			return
		}
	}
	name := p.path(title)
	switch mark {
	case markPass:
		p.pending.pass(name)
	case markFail:
		p.pending.fail(name)
		p.markAncestorsFailed()
	}
}

// vitestResult handles a flat vitest line: "math > adds 1ms", or a file line "math.test.js (8 tests | 2
// failed) 10ms" which is not a test.
func (p *jsParser) vitestResult(title string, mark jsMark) {
	if i := strings.Index(title, " ("); i >= 0 {
		if after := title[i+2:]; len(after) > 0 && after[0] >= '0' && after[0] <= '9' &&
			(strings.Contains(after, " test)") || strings.Contains(after, " tests)") || strings.Contains(after, " tests |") || strings.Contains(after, " test |")) {
			return
		}
	}
	title = trimDuration(title)
	name := stripFilePrefix(title)
	switch mark {
	case markPass:
		p.pending.pass(name)
	case markFail:
		p.pending.fail(name)
	}
}

func (p *jsParser) markAncestorsFailed() {
	for i := range p.stack {
		p.stack[i].childFailed = true
	}
}

// path joins the describe stack and title with " > ".
func (p *jsParser) path(title string) string {
	if len(p.stack) == 0 {
		return title
	}
	var b strings.Builder
	for _, f := range p.stack {
		b.WriteString(f.title)
		b.WriteString(" > ")
	}
	b.WriteString(title)
	return b.String()
}

// suite handles an unmarked line: in a spec tree, an indented line is a describe title.
func (p *jsParser) suite(ind int, t string) {
	if ind < 2 || p.mode == jsNode || p.mode == jsVitest {
		return
	}
	p.push(jsFrame{indent: ind, title: t})
}

func (p *jsParser) push(f jsFrame) {
	for len(p.stack) > 0 && p.stack[len(p.stack)-1].indent >= f.indent {
		p.stack = p.stack[:len(p.stack)-1]
	}
	if len(p.stack) < maxJSDepth {
		f.title = strings.Clone(truncateName(f.title))
		p.stack = append(p.stack, f)
	}
}

func (p *jsParser) boundary() {
	if p.mocha.open {
		p.closeMocha()
	}
	if p.node.open {
		p.closeNode()
	}
	if p.headed && p.mode != jsNone {
		// A jest, vitest or node run without its summary (killed, truncated): its names, no counts.
		p.c.add(p.mode.format(), section{passed: unknown, failed: unknown, skipped: unknown})
		p.pending.flush(p.c)
	}
	p.pending.reset()
	*p = jsParser{c: p.c, pending: p.pending, stack: p.stack[:0]}
}

// cleanJSTitle drops what reporters print after a title: jest "(2 ms)", node "(0.8ms) # TODO", mocha
// "(52ms)". todo reports a node "# TODO" (or "# SKIP") directive.
func cleanJSTitle(t string) (title string, todo bool) {
	if i := strings.LastIndex(t, " # "); i >= 0 {
		// node: "rounds (0.11ms) # TODO", "divides (0.09ms) # not on this platform".
		if j := strings.LastIndex(t[:i], " ("); j >= 0 && strings.HasSuffix(t[:i], ")") && isDuration(t[j+2:i-1]) {
			dir := t[i+3:]
			return t[:j], strings.HasPrefix(dir, "TODO") || strings.HasPrefix(dir, "SKIP")
		}
	}
	if strings.HasSuffix(t, ")") {
		if j := strings.LastIndex(t, " ("); j >= 0 && isDuration(t[j+2:len(t)-1]) {
			t = t[:j]
		}
	}
	// jest prints "skipped"/"todo" before the title of ○/✎ lines; harmless for names since those are
	// not recorded.
	return t, false
}

// isDuration matches "2 ms", "0.814448ms", "52ms", "1.2 s".
func isDuration(s string) bool {
	s = strings.TrimSpace(s)
	num := strings.TrimRight(s, "ms ")
	if num == "" || num == s {
		return false
	}
	for _, r := range num {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return true
}

// trimDuration drops vitest's trailing " 12ms" / " 1.2s".
func trimDuration(t string) string {
	i := strings.LastIndex(t, " ")
	if i < 0 {
		return t
	}
	last := t[i+1:]
	num := strings.TrimSuffix(strings.TrimSuffix(last, "ms"), "s")
	if num != last && num != "" && strings.Trim(num, "0123456789.") == "" {
		return t[:i]
	}
	return t
}

// stripFilePrefix drops a leading "file.test.js > " segment so vitest names read like the other JS
// runners' ("describe > test").
func stripFilePrefix(name string) string {
	first, rest, ok := strings.Cut(name, " > ")
	if ok && looksLikeSourceFile(first) {
		return rest
	}
	return name
}

// looksLikeSourceFile reports whether s names a JavaScript/TypeScript file.
func looksLikeSourceFile(s string) bool {
	if strings.ContainsAny(s, " \t") {
		return false
	}
	for _, ext := range []string{".js", ".ts", ".mjs", ".cjs", ".jsx", ".tsx", ".mts", ".cts", ".vue", ".svelte"} {
		if strings.HasSuffix(s, ext) {
			return true
		}
	}
	return false
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
