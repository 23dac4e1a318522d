package postmortem

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

func events(seqs ...int64) []api.Event {
	out := make([]api.Event, len(seqs))
	for i, s := range seqs {
		out[i] = api.Event{Seq: s, Type: "STEP_FINISHED", Payload: []byte(`{}`)}
	}
	return out
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// The timeline keeps the first and last TimelineEnds events and says how
// many it left out, whether it was given every event or only the ends
// with the total; the newest event is never dropped.
func TestTimeline(t *testing.T) {
	ends := append(seqRange(1, TimelineEnds), seqRange(100_000-TimelineEnds+1, 100_000)...)
	for _, tc := range []struct {
		name      string
		evs       []api.Event
		total     int
		wantLen   int
		wantGap   string
		wantFirst int64
		wantLast  int64
	}{
		{"short run, all events", events(seqRange(1, 50)...), 0, 50, "", 1, 50},
		{"long run, all events", events(seqRange(1, 250)...), 0, maxTimeline + 1, "50 events omitted", 1, 250},
		{"a million-event run, ends only", events(ends...), 100_000, maxTimeline + 1, fmt.Sprintf("%d events omitted", 100_000-maxTimeline), 1, 100_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := timeline(tc.evs, tc.total)
			if len(got) != tc.wantLen {
				t.Fatalf("%d entries, want %d", len(got), tc.wantLen)
			}
			if got[0].Seq != tc.wantFirst || got[len(got)-1].Seq != tc.wantLast {
				t.Errorf("first %d last %d, want %d and %d", got[0].Seq, got[len(got)-1].Seq, tc.wantFirst, tc.wantLast)
			}
			gap := ""
			for _, e := range got {
				if e.Type == "…" {
					gap = e.Detail
				}
			}
			if gap != tc.wantGap {
				t.Errorf("gap %q, want %q", gap, tc.wantGap)
			}
		})
	}
}

// The report is read on terminals: what a repository wrote into the goal,
// a test name or the verification's output is quoted, line breaks stay.
func TestMarkdownQuotesControlCharacters(t *testing.T) {
	md := Markdown(Summary{RunID: "r1", Goal: "fix it\x1b]0;pwned\x07\nsecond line \u202eesrever",
		Status: api.RunFailed, Reason: "max_iterations:1", Description: "Reached 1 iteration",
		LastFailure: &Failure{Seq: 2, Phase: api.PhaseVerification, Iteration: 1, Error: "tests failed",
			FailedTests: []string{"test_x[\x1b[2K\r]"}, OutputTail: "FAILED\r\x1b[2Kok\n"}})
	for _, r := range md {
		if r == 0x1b || r == '\r' || r == '\a' || r == '\u202e' {
			t.Fatalf("Markdown holds %U:\n%s", r, md)
		}
	}
	for _, want := range []string{"> fix it\\x1b]0;pwned\\a\n> second line \\u202eesrever", `test_x[\x1b[2K\r]`, `FAILED\r\x1b[2Kok`} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

// The baseline's failures (verify_baseline) were there before the run:
// never the report's "last failure"; a real failure after it is.
func TestBaselineIsNoLastFailure(t *testing.T) {
	steps := []api.Step{
		{Seq: 1, Phase: api.PhaseBaseline, Status: api.StepFailed, Error: "exit code 1"},
		{Seq: 2, Phase: api.PhaseImplementation, Iteration: 1, Status: api.StepSucceeded},
	}
	if s := Build(Input{Steps: steps}); s.LastFailure != nil {
		t.Fatalf("last failure = %+v, want none", s.LastFailure)
	}
	steps = append(steps, api.Step{Seq: 3, Phase: api.PhaseImplementation, Iteration: 2, Status: api.StepFailed, Error: "boom"})
	if s := Build(Input{Steps: steps}); s.LastFailure == nil || s.LastFailure.Seq != 3 {
		t.Fatalf("last failure = %+v, want step 3", s.LastFailure)
	}
}
