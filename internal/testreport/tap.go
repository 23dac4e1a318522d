package testreport

import (
	"strings"
)

// maxTAPDepth caps subtest nesting.
const maxTAPDepth = 32

// tapParser reads Test Anything Protocol streams: `ok 1 - name`, `not ok 2 - name # TODO why`,
// `ok 3 # SKIP why`, plans `1..N` (before or after the points), `# Subtest: name` with its points
// indented four spaces per level (TAP 14, Perl's Test::More, node --test-reporter=tap), and `Bail out!`.
//
// Counting, without a trailer: leaves only — a point whose subtests were printed before it is their
// parent and counts only if it failed while none of them did; TODO points and `ok … # SKIP` count as
// skipped (a TODO failure is not a failure, per TAP), `not ok … # SKIP` as failed, as TAP::Parser counts
// it; planned points that never appeared count as failed. A
// trailer of `# pass N` / `# fail N` comments (node, tape, mocha) is the authority when present, for
// skips too if it has a `# skip`/`# skipped`/`# todo` line (mocha's has none: its skips are counted from
// the points); node's (with `# cancelled` or `# duration_ms`) makes the stream FormatNodeTest. Names join subtest names with " > ".
type tapParser struct {
	c *collector

	inStream                bool
	bailed                  bool // "Bail out!": the producer gave up
	plan                    int  // top-level plan, -1 when none yet
	top, lastNum            int  // top-level points seen, and the last one's number
	passed, failed, skipped int
	names                   []string   // "# Subtest:" names by depth
	levels                  []tapLevel // per depth: points seen since the parent's point
	trailer                 tapTrailer
}

// tapLevel is what happened at one depth since the enclosing point.
type tapLevel struct {
	points int
	failed bool
}

// tapTrailer is the "# tests/# pass/# fail" block some producers end a stream with.
type tapTrailer struct {
	seen, node              bool
	passed, failed, skipped int
	// skipSeen: the trailer has a skip or todo line. Mocha's TAP reporter
	// (and tape's) has none, though it marks its skipped tests
	// `ok 4 … # SKIP -`: their skips are then counted from the points.
	skipSeen bool
}

func newTAPParser(c *collector) *tapParser { return &tapParser{c: c, plan: -1} }

func (p *tapParser) line(s string) {
	t := strings.TrimLeft(s, " ")
	if t == "" {
		return
	}
	depth := (len(s) - len(t)) / 4
	switch t[0] {
	case 'o', 'n':
		if strings.HasPrefix(t, "ok") || strings.HasPrefix(t, "not ok") {
			p.point(depth, t)
		}
	case '1':
		if depth == 0 {
			p.planLine(t)
		}
	case '#':
		p.comment(depth, t)
	case 'T':
		if depth == 0 && strings.HasPrefix(t, "TAP version ") {
			p.endStream()
			p.inStream = true
		}
	case 'B':
		if strings.HasPrefix(t, "Bail out!") && p.inStream {
			p.c.build("")
			p.bailed = true
		}
	}
}

// planLine handles "1..N" and "1..0 # SKIP why".
func (p *tapParser) planLine(t string) {
	rest, ok := strings.CutPrefix(t, "1..")
	if !ok {
		return
	}
	num, _, _ := strings.Cut(rest, " ")
	n, ok := atoi(num)
	if !ok {
		return
	}
	if p.inStream && p.plan >= 0 && p.top > 0 {
		p.endStream() // a second stream that starts with its plan
	}
	p.inStream = true
	p.plan = n
}

// comment handles "# Subtest: name" and trailer counts "# pass 7".
func (p *tapParser) comment(depth int, t string) {
	if name, ok := strings.CutPrefix(t, "# Subtest: "); ok {
		if depth < maxTAPDepth {
			for len(p.names) <= depth {
				p.names = append(p.names, "")
			}
			p.names = p.names[:depth+1]
			p.names[depth] = strings.Clone(truncateName(strings.TrimSpace(name)))
		}
		return
	}
	if depth != 0 || !p.inStream {
		return
	}
	f := strings.Fields(t[1:])
	if len(f) != 2 {
		return
	}
	if f[0] == "duration_ms" {
		p.trailer.node = true
		return
	}
	n, ok := atoi(f[1])
	if !ok {
		return
	}
	switch f[0] {
	case "pass":
		p.trailer.passed = n
	case "fail":
		p.trailer.failed += n
	case "cancelled":
		p.trailer.failed += n
		p.trailer.node = true
	case "skipped", "skip", "todo":
		p.trailer.skipped += n
		p.trailer.skipSeen = true
	case "tests", "suites":
		return
	default:
		return
	}
	p.trailer.seen = true
}

// point handles "ok 1 - name", "not ok 2 name # TODO why", "ok # skip".
func (p *tapParser) point(depth int, t string) {
	ok := t[0] == 'o'
	rest := strings.TrimPrefix(strings.TrimPrefix(t, "not ok"), "ok")
	if rest != "" && (rest[0] != ' ' || len(rest) > 1 && (rest[1] == ' ' || rest[1] == '\t')) {
		return // "okay", "nothing", and go test's "ok  \tpkg\t0.1s"
	}
	rest = strings.TrimLeft(rest, " ")
	numStr := rest
	if i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		numStr = rest[:i]
	}
	num, hasNum := atoi(numStr)
	if !hasNum && !p.inStream {
		return // an unnumbered "ok" outside a stream is too common in other output
	}
	desc := strings.TrimLeft(rest[len(numStr):], " ")
	if len(numStr) > 0 && desc != "" && rest[len(numStr)] != ' ' {
		return // "ok 1x"
	}
	desc, directive := tapDirective(desc)
	desc = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(desc, "-"), " "))
	// TODO: skipped, never a failure, whether it failed or (a bonus)
	// passed. SKIP: skipped, unless the point says "not ok", which
	// TAP::Parser counts as a failure.
	todo := directive == "TODO"
	skip := todo || (directive == "SKIP" && ok)

	if depth == 0 && hasNum && p.inStream && p.top > 0 && num <= p.lastNum {
		p.endStream() // numbering restarted: the next file's stream
	}
	p.inStream = true
	if depth >= maxTAPDepth {
		return
	}
	for len(p.levels) <= depth+1 {
		p.levels = append(p.levels, tapLevel{})
	}
	children := p.levels[depth+1]
	for i := depth + 1; i < len(p.levels); i++ {
		p.levels[i] = tapLevel{}
	}
	if depth == 0 {
		p.top++
		if hasNum {
			p.lastNum = num
		}
	}
	if desc == "" && hasNum {
		desc = numStr
	}
	name := p.path(depth, desc)
	failed := !ok && !todo
	lvl := &p.levels[depth]
	lvl.points++
	if failed {
		lvl.failed = true
	}
	if children.points > 0 {
		// A parent: its subtests were counted. Its own failure counts only if none of theirs explains it.
		if failed && !children.failed {
			p.failed++
			p.c.fail(name)
		}
		return
	}
	switch {
	case skip:
		p.skipped++
	case failed:
		p.failed++
		p.c.fail(name)
	default:
		p.passed++
		p.c.pass(name)
	}
}

// path joins the enclosing subtest names and desc with " > ".
func (p *tapParser) path(depth int, desc string) string {
	parts := make([]string, 0, depth+1)
	for i := 0; i < depth && i < len(p.names); i++ {
		if p.names[i] != "" {
			parts = append(parts, p.names[i])
		}
	}
	return strings.Join(append(parts, desc), " > ")
}

// endStream closes the current stream, if any.
func (p *tapParser) endStream() {
	if !p.inStream {
		return
	}
	s := section{passed: known(p.passed), failed: known(p.failed), skipped: known(p.skipped)}
	if p.plan > p.top {
		// Planned points that never appeared: the producer died or bailed out.
		s.failed = addCount(s.failed, known(p.plan-p.top))
	}
	format := FormatTAP
	if p.trailer.seen {
		skipped := p.trailer.skipped
		if !p.trailer.skipSeen {
			skipped = p.skipped
		}
		s = section{passed: known(p.trailer.passed), failed: known(p.trailer.failed), skipped: known(skipped)}
		if p.trailer.node {
			format = FormatNodeTest
		}
	}
	if p.top > 0 || p.plan >= 0 || p.trailer.seen || p.bailed {
		p.c.add(format, s)
	}
	*p = tapParser{c: p.c, plan: -1, names: p.names[:0], levels: p.levels[:0]}
}

func (p *tapParser) boundary() { p.endStream() }

// tapDirective splits a test point's description from its directive, the way TAP::Parser does: the
// first '#' not escaped with a backslash, optional whitespace, then SKIP or TODO in any case, ending at
// a word boundary ("# skip why", "#TODO", "-# SKIP"; not "# Skipped", not "#42"). directive is "SKIP",
// "TODO" or "" (no directive: desc is the whole text).
func tapDirective(text string) (desc, directive string) {
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\\':
			i++ // an escaped character, '#' included
			continue
		case '#':
		default:
			continue
		}
		rest := strings.TrimLeft(text[i+1:], " \t")
		if len(rest) < 4 {
			return text, ""
		}
		word := strings.ToUpper(rest[:4])
		if (word != "SKIP" && word != "TODO") || (len(rest) > 4 && isWordByte(rest[4])) {
			return text, ""
		}
		return strings.TrimSpace(text[:i]), word
	}
	return text, ""
}

// isWordByte is a byte of a regular-expression word (\w).
func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
