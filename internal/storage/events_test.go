package storage

import (
	"testing"

	"github.com/loopd/loopd/internal/events"
)

// EventEnds returns a run's first and last n events, each once and in
// order, and the run's total, for runs shorter and longer than 2n.
func TestEventEnds(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		for _, tc := range []struct {
			name  string
			extra int // events after RUN_CREATED
			n     int
		}{
			{"short run", 3, 10},
			{"exactly 2n", 9, 5},
			{"long run", 249, 100},
		} {
			t.Run(tc.name, func(t *testing.T) {
				id := "run-" + tc.name
				newRun(t, s, id)
				newRun(t, s, id+"-other") // another run's events never count
				err := s.Write(t.Context(), func(tx *Tx) error {
					for range tc.extra {
						if _, err := tx.Event(id, nil, events.ConditionProgressed, map[string]int{}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				all, err := s.Events(t.Context(), id, 0, 1_000_000)
				if err != nil {
					t.Fatal(err)
				}
				got, total, err := s.EventEnds(t.Context(), id, tc.n)
				if err != nil {
					t.Fatal(err)
				}
				if total != len(all) || total != tc.extra+1 {
					t.Fatalf("total %d, want %d", total, len(all))
				}
				want := all
				if len(all) > 2*tc.n {
					want = append(append([]Event(nil), all[:tc.n]...), all[len(all)-tc.n:]...)
				}
				if len(got) != len(want) {
					t.Fatalf("%d events, want %d", len(got), len(want))
				}
				for i := range want {
					if got[i].Seq != want[i].Seq {
						t.Fatalf("event %d: seq %d, want %d", i, got[i].Seq, want[i].Seq)
					}
				}
			})
		}
	})
}

// The commit hook names the runs whose events the commit wrote, once each.
func TestNotifyRunsNamesTheCommitsRuns(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "a")
		newRun(t, s, "b")
		var got []string
		var gotSeq int64
		s.SetNotifyRuns(func(seq int64, runs []string) { gotSeq, got = seq, append([]string(nil), runs...) })
		err := s.Write(t.Context(), func(tx *Tx) error {
			for _, id := range []string{"b", "a", "b"} {
				if _, err := tx.Event(id, nil, events.ConditionProgressed, nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != "b" || got[1] != "a" {
			t.Errorf("runs %v, want [b a]", got)
		}
		if last, _ := s.LastEventSeq(t.Context()); gotSeq != last {
			t.Errorf("seq %d, want %d", gotSeq, last)
		}
	})
}
