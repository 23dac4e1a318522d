package testreport

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

// hugeOutput generates `go test -v`-shaped output of at least size bytes on the fly, never holding more
// than one block: noise log lines (some coloured, some far longer than MaxLineLen) around result lines.
// Every 997th test fails and every 1009th is skipped, so the expected counts are known exactly.
type hugeOutput struct {
	size, produced int64
	i              int // tests generated
	buf            []byte
	done           bool

	// sample is called every sampleEvery bytes, to watch the heap while Parse runs.
	sample      func()
	sampleEvery int64
	nextSample  int64

	passed, failed, skipped int
}

// longLine is one log line of 3×MaxLineLen bytes, emitted every 10,000 tests.
var longLine = "    huge_test.go:1: " + strings.Repeat("0123456789abcdef", 3*MaxLineLen/16) + "\n"

func (h *hugeOutput) Read(p []byte) (int, error) {
	for len(h.buf) == 0 {
		if h.done {
			return 0, io.EOF
		}
		h.next()
	}
	n := copy(p, h.buf)
	h.buf = h.buf[n:]
	h.produced += int64(n)
	if h.sample != nil && h.produced >= h.nextSample {
		h.nextSample += h.sampleEvery
		h.sample()
	}
	return n, nil
}

// next appends one block: a test, or the closing package line once size is reached.
func (h *hugeOutput) next() {
	b := h.buf[:0]
	if h.produced >= h.size {
		b = fmt.Appendf(b, "FAIL\texample.com/huge\t%d.000s\n", h.i/1000)
		h.buf, h.done = b, true
		return
	}
	h.i++
	name := fmt.Sprintf("TestHuge%07d", h.i)
	b = fmt.Appendf(b, "=== RUN   %s\n", name)
	b = fmt.Appendf(b, "    huge_test.go:42: \x1b[33mwarming cache\x1b[0m for %s: %s\n", name, strings.Repeat("·", 20))
	if h.i%10000 == 0 {
		b = append(b, longLine...)
	}
	switch {
	case h.i%997 == 0:
		b = fmt.Appendf(b, "    huge_test.go:50: want 1, got 2\n--- FAIL: %s (0.00s)\n", name)
		h.failed++
	case h.i%1009 == 0:
		b = fmt.Appendf(b, "    huge_test.go:51: skipping\n--- SKIP: %s (0.00s)\n", name)
		h.skipped++
	default:
		b = fmt.Appendf(b, "--- PASS: %s (0.00s)\n", name)
		h.passed++
	}
	h.buf = b
}

// TestParse200MB parses 200 MB of output generated through an io.Reader without ever materialising it,
// checks the exact counts, and checks that the heap does not grow with the input: the live heap,
// sampled every 8 MB while parsing, must stay far below the input size. (With -race it reads 40 MB:
// the detector slows parsing about tenfold, and the bound does not depend on the size.)
func TestParse200MB(t *testing.T) {
	if testing.Short() {
		t.Skip("200 MB of input: skipped with -short")
	}
	size := int64(200 << 20)
	if raceEnabled {
		size = 40 << 20 // the race detector makes this ~10× slower; the bound is the same
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	h := &hugeOutput{size: size, sampleEvery: 8 << 20}
	h.sample = func() {
		// Collect first: what is measured is what Parse keeps alive, not garbage the collector has
		// not reached yet (which depends on how busy the machine is).
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > base {
			peak = max(peak, ms.HeapAlloc-base)
		}
	}

	r, err := Parse(h)
	if err != nil {
		t.Fatal(err)
	}

	if h.produced < size {
		t.Fatalf("generated only %d bytes", h.produced)
	}
	if show(r.Passed) != itoa(h.passed) || show(r.Failed) != itoa(h.failed) || show(r.Skipped) != itoa(h.skipped) {
		t.Errorf("passed/failed/skipped = %s/%s/%s, want %d/%d/%d",
			show(r.Passed), show(r.Failed), show(r.Skipped), h.passed, h.failed, h.skipped)
	}
	if len(r.FailedNames) != min(h.failed, MaxNames) || len(r.PassedNames) != MaxNames {
		t.Errorf("names: %d failed, %d passed; want %d and %d", len(r.FailedNames), len(r.PassedNames), min(h.failed, MaxNames), MaxNames)
	}
	if r.FailedNames[0] != "TestHuge0000997" {
		t.Errorf("first failed name = %q", r.FailedNames[0])
	}
	// What Parse may keep: two name lists (≤ 1,000 short names each), a 64 KiB line and reader buffers.
	// 16 MiB is far below the input and far above what it needs.
	const limit = 16 << 20
	t.Logf("input %d MiB, %d tests; peak live heap growth sampled while parsing: %.1f MiB",
		h.produced>>20, h.i, float64(peak)/(1<<20))
	if peak > limit {
		t.Errorf("heap grew by %d bytes while parsing %d bytes: memory is not bounded", peak, h.produced)
	}
}

// xmlWithHugeOutput generates a JUnit report whose <system-out> holds size bytes of log, followed by
// cases; it never holds more than one chunk.
func xmlWithHugeOutput(size int) io.Reader {
	head := strings.NewReader(`<?xml version="1.0"?><testsuites><testsuite name="big" tests="2">` +
		`<testcase classname="pkg.Big" name="logs"><system-out><![CDATA[`)
	chunk := strings.Repeat("log line with <angle> & ]] brackets and ünïcödé\n", 1024)
	body := io.LimitReader(&repeatReader{s: chunk}, int64(size))
	tail := strings.NewReader(`]]></system-out></testcase>` +
		`<testcase classname="pkg.Big" name="fails"><failure message="` + strings.Repeat("x&amp;y ", 20000) + `">` +
		strings.Repeat("trace &lt;frame&gt;\n", 100000) + `</failure></testcase></testsuite></testsuites>`)
	return io.MultiReader(head, body, tail)
}

// repeatReader repeats s forever.
type repeatReader struct {
	s   string
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.s[r.off:])
		n += c
		r.off = (r.off + c) % len(r.s)
	}
	return n, nil
}

// TestParseJUnitHugeText checks that a report with a 100 MB <system-out> and a multi-megabyte failure
// message parses with a live heap that does not grow with the text.
func TestParseJUnitHugeText(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MB of input: skipped with -short")
	}
	size := 100 << 20
	if raceEnabled {
		size = 20 << 20
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	sampled := &sampleReader{r: xmlWithHugeOutput(size), every: 8 << 20, sample: func() {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > base {
			peak = max(peak, ms.HeapAlloc-base)
		}
	}}
	r, err := ParseJUnit(sampled)
	if err != nil {
		t.Fatal(err)
	}
	if show(r.Passed) != "1" || show(r.Failed) != "1" || r.FailedNames[0] != "pkg.Big.fails" {
		t.Errorf("got %s", r.Summary())
	}
	t.Logf("input %d MiB; peak live heap growth sampled while parsing: %.1f MiB", sampled.n>>20, float64(peak)/(1<<20))
	if peak > 16<<20 {
		t.Errorf("heap grew by %d bytes while parsing %d bytes: memory is not bounded", peak, sampled.n)
	}
}

// sampleReader calls sample every every bytes read.
type sampleReader struct {
	r      io.Reader
	n      int64
	every  int64
	next   int64
	sample func()
}

func (s *sampleReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	if s.n >= s.next {
		s.next += s.every
		s.sample()
	}
	return n, err
}
