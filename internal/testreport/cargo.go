package testreport

import (
	"strings"
)

// cargoParser reads `cargo test` (libtest) output: one block per test binary and for the doc-tests,
// each "running N tests", "test path ... ok|FAILED|ignored" lines and a closing
// "test result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; …". The result lines
// are summed. A binary that started but never printed its result crashed (a signal, an abort): what it
// printed counts, plus one failure. "error: could not compile `crate`" sets BuildFailed.
type cargoParser struct {
	c *collector

	open                    bool // "running N tests" without its "test result:" yet
	passed, failed, skipped int  // result lines of the open binary
}

func newCargoParser(c *collector) *cargoParser { return &cargoParser{c: c} }

func (p *cargoParser) line(s string) {
	if len(s) < 6 {
		return
	}
	switch s[0] {
	case 'r':
		if rest, ok := strings.CutPrefix(s, "running "); ok {
			num, word, _ := strings.Cut(rest, " ")
			if _, isNum := atoi(num); isNum && (word == "tests" || word == "test") {
				p.crashed()
				p.open = true
				p.c.recognize(FormatCargo)
			}
		}
	case 't':
		if rest, ok := strings.CutPrefix(s, "test result: "); ok {
			p.result(rest)
			return
		}
		if rest, ok := strings.CutPrefix(s, "test "); ok {
			p.test(rest)
		}
	case 'e':
		if rest, ok := strings.CutPrefix(s, "error: could not compile `"); ok {
			crate, _, _ := strings.Cut(rest, "`")
			p.c.build(crate)
			p.c.add(FormatCargo, section{passed: unknown, failed: unknown, skipped: unknown})
		}
		if strings.HasPrefix(s, "error: test failed, to rerun pass ") {
			p.crashed()
		}
	}
}

// test handles "tests::adds ... ok", "src/lib.rs - add (line 3) ... FAILED", "slow ... ignored, reason".
func (p *cargoParser) test(rest string) {
	i := strings.LastIndex(rest, " ... ")
	if i <= 0 {
		return
	}
	name, outcome := rest[:i], rest[i+len(" ... "):]
	switch {
	case outcome == "ok":
		p.passed++
		p.c.pass(name)
	case outcome == "FAILED":
		p.failed++
		p.c.fail(name)
	case outcome == "ignored" || strings.HasPrefix(outcome, "ignored, "):
		p.skipped++
	default:
		return
	}
}

// result handles "ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s".
func (p *cargoParser) result(rest string) {
	status, counts, ok := strings.Cut(rest, ". ")
	if !ok || status != "ok" && status != "FAILED" {
		return
	}
	var passed, failed, ignored int
	var seen bool
	for part := range strings.SplitSeq(counts, "; ") {
		num, word, ok := strings.Cut(part, " ")
		n, okN := atoi(num)
		if !ok || !okN {
			continue
		}
		switch word {
		case "passed":
			passed, seen = n, true
		case "failed":
			failed = n
		case "ignored":
			ignored = n
		}
	}
	if !seen {
		return
	}
	p.c.add(FormatCargo, section{passed: known(passed), failed: known(failed), skipped: known(ignored)})
	*p = cargoParser{c: p.c}
}

// crashed closes a binary that never printed its result line.
func (p *cargoParser) crashed() {
	if !p.open {
		return
	}
	p.c.add(FormatCargo, section{passed: known(p.passed), failed: known(p.failed + 1), skipped: known(p.skipped)})
	*p = cargoParser{c: p.c}
}

func (p *cargoParser) boundary() { p.crashed() }
