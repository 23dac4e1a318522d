package main

import (
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// answer posts the words given, joined, for the run named; a run that is
// not waiting for an answer (conflict) exits 64 with the daemon's words,
// and an empty answer is refused before any request.
func TestAnswerCmd(t *testing.T) {
	f := newFakeAPI(t)
	f.reply("POST /v1/runs/{ref}/answer", api.Run{ID: runID, Status: api.RunPending})
	loopctl(t, f, "answer", "abc", "Use", "SQLite.").expect(t, exitOK,
		lines("run 0123456789ab: answered; it resumes with the question and your answer in its next prompt\n"))
	if got := decode[api.AnswerRequest](t, f.only("POST", "/v1/runs/abc/answer")); got.Text != "Use SQLite." {
		t.Errorf("answer text %q", got.Text)
	}

	f = newFakeAPI(t)
	f.fail("POST /v1/runs/{ref}/answer", api.CodeConflict, "run 01234567 is RUNNING, not waiting for an answer")
	loopctl(t, f, "answer", runID, "yes").expect(t, exitUsage, nil, "loopctl: run 01234567 is RUNNING, not waiting for an answer\n")

	f = newFakeAPI(t)
	loopctl(t, f, "answer", runID, "  ").expect(t, exitUsage, nil, "the answer is empty")
	if n := len(f.requests()); n != 0 {
		t.Errorf("an empty answer sent %d request(s)", n)
	}
	loopctl(t, f, "answer", runID).expect(t, exitUsage, nil)
}
