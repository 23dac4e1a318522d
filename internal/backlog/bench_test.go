package backlog

import (
	"strconv"
	"strings"
	"testing"
)

// largestList is near the limits: MaxTasks tasks, each depending on up to
// 300 of the tasks before it, just under MaxSize.
func largestList(tb testing.TB) []byte {
	var b strings.Builder
	b.WriteString(`{"tasks":[`)
	for i := range MaxTasks {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"id":"t` + strconv.Itoa(i) + `","title":"task ` + strconv.Itoa(i) + `","depends_on":[`)
		for j := max(0, i-300); j < i; j++ {
			if j > max(0, i-300) {
				b.WriteString(",")
			}
			b.WriteString(`"t` + strconv.Itoa(j) + `"`)
		}
		b.WriteString("]}")
	}
	b.WriteString("]}")
	if b.Len() > MaxSize {
		tb.Fatalf("the list is %d bytes, over MaxSize", b.Len())
	}
	return []byte(b.String())
}

func BenchmarkParseLargest(b *testing.B) {
	data := largestList(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		l, err := Parse("tasks.json", data)
		if err != nil || len(l.Tasks) != MaxTasks {
			b.Fatalf("Parse: %v", err)
		}
	}
}

func BenchmarkOrderedLargest(b *testing.B) {
	l, err := Parse("tasks.json", largestList(b))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if len(l.Ordered()) != MaxTasks {
			b.Fatal("Ordered lost tasks")
		}
	}
}

func BenchmarkParsePRDFixture(b *testing.B) {
	l, err := ReadFile("testdata/prd.json")
	if err != nil || len(l.Tasks) == 0 {
		b.Fatal(err)
	}
	data := []byte(`{"userStories":[{"id":"US-001","title":"T","acceptanceCriteria":["a","b"],"priority":1,"passes":false}]}`)
	for b.Loop() {
		if _, err := Parse("prd.json", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseUnknownDependencies is the worst refusal: every task
// depends on ids that are not in the list, each a candidate for "did you
// mean".
func BenchmarkParseUnknownDependencies(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"tasks":[`)
	for i := range MaxTasks {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"id":"task` + strconv.Itoa(i) + `","title":"T","depends_on":[`)
		for j := range 300 {
			if j > 0 {
				sb.WriteString(",")
			}
			sb.WriteString(`"nope` + strconv.Itoa(j) + `"`)
		}
		sb.WriteString("]}")
	}
	sb.WriteString("]}")
	data := []byte(sb.String())
	for b.Loop() {
		if _, err := Parse("tasks.json", data); err == nil {
			b.Fatal("accepted")
		}
	}
}

// BenchmarkParseMarkdownLongAfter is one item whose (after …) fills the
// size limit.
func BenchmarkParseMarkdownLongAfter(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("- [ ] a {#a}\n- [ ] b (after")
	for i := 0; sb.Len() < MaxSize-16; i++ {
		sb.WriteString(" #a" + strconv.Itoa(i%1000))
	}
	sb.WriteString(")\n")
	data := []byte(sb.String())
	for b.Loop() {
		if _, err := Parse("plan.md", data); err == nil {
			b.Fatal("accepted")
		}
	}
}
