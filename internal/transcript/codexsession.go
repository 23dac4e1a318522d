package transcript

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// CodexSessionUsage reads the usage of the model requests that Codex
// recorded in its session files ($CODEX_HOME/sessions/YYYY/MM/DD/
// rollout-*-<thread_id>.jsonl) for the given threads, counting only the
// requests recorded at or after since (the step's start).
//
// It is the exact source for a Codex step: `codex exec --json` prints usage
// only with turn.completed, so a turn that failed after billed requests (a
// 429, a 5xx, a cut stream) or a step killed mid-turn prints none, and
// `codex exec resume` prints the whole thread's running total, which counts
// earlier steps' turns again. The session file has one token_usage_record
// per response (Codex 0.169); older versions write token_count events with
// the thread's cumulative total, whose growth since the step's start is
// used instead.
//
// ok is false when no session file or no usage record was found (the
// caller keeps what the output said).
func CodexSessionUsage(codexHome string, threads []string, since time.Time) (u Usage, ok bool, err error) {
	for _, th := range threads {
		if th == "" || filepath.Base(th) != th {
			continue // not a thread id: never a path
		}
		files, _ := filepath.Glob(filepath.Join(codexHome, "sessions", "*", "*", "*", "rollout-*-"+th+".jsonl"))
		for _, f := range files {
			fu, fok, ferr := codexSessionFile(f, since)
			if ferr != nil {
				err = errors.Join(err, ferr)
				continue
			}
			if fok {
				u.add(fu)
				ok = true
			}
		}
	}
	return u, ok, err
}

// rolloutLine declares what is read of a session file line.
type rolloutLine struct {
	Timestamp time.Time `json:"timestamp"`
	Type      string    `json:"type"`
	Payload   struct {
		Type       string       `json:"type"`
		ResponseID string       `json:"response_id"`
		Usage      *usageFields `json:"usage"`
		Info       *tokenInfo   `json:"info"`
	} `json:"payload"`
}

func codexSessionFile(path string, since time.Time) (Usage, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return Usage{}, false, fmt.Errorf("open codex session: %w", err)
	}
	defer f.Close()
	var (
		records     Usage
		haveRecords bool
		seen        = map[string]bool{}
		before      *usageFields // the last cumulative total before since
		last        *usageFields // the last cumulative total
	)
	for whole, err := range sessionLines(f) {
		if err != nil {
			return Usage{}, false, fmt.Errorf("read codex session: %w", err)
		}
		if whole[0] != '{' ||
			!bytes.Contains(whole, []byte(`"token_usage_record"`)) && !bytes.Contains(whole, []byte(`"token_count"`)) {
			continue
		}
		var rl rolloutLine
		if !decode(whole, &rl) {
			continue
		}
		after := !rl.Timestamp.Before(since)
		switch {
		case rl.Type == "token_usage_record" && rl.Payload.Usage != nil:
			haveRecords = true
			id := rl.Payload.ResponseID
			if after && (id == "" || !seen[id]) {
				seen[id] = id != ""
				records.add(rl.Payload.Usage.openAI())
			}
		case rl.Payload.Type == "token_count" && rl.Payload.Info != nil && rl.Payload.Info.Total != nil:
			t := rl.Payload.Info.Total
			if !after {
				before = t
			}
			last = t
		}
	}
	switch {
	case haveRecords:
		return records, true, nil
	case last != nil:
		u := last.openAI()
		if before != nil {
			u = u.minus(before.openAI())
			u = maxUsage(u, Usage{}) // a restated total never goes negative
		}
		return u, true, nil
	}
	return Usage{}, false, nil
}
