package transcript

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// GeminiSessionUsage reads the usage Gemini CLI recorded in its session
// file ($HOME/.gemini/tmp/<project>/chats/session-*.jsonl) for the session
// sessionID, counting the responses recorded at or after since.
//
// Gemini CLI writes each response's tokens there as soon as the response
// ends, while its stream-json output reports usage only in its final result
// line, which a killed CLI never prints: this is how a killed Gemini step
// keeps its tokens. Thoughts are billed as output and counted so.
//
// ok is false when no file of that session, or no response in it, was found.
func GeminiSessionUsage(geminiDir, sessionID string, since time.Time) (u Usage, ok bool, err error) {
	if sessionID == "" || filepath.Base(sessionID) != sessionID {
		return Usage{}, false, nil
	}
	files, _ := filepath.Glob(filepath.Join(geminiDir, "tmp", "*", "chats", "session-*.jsonl"))
	for _, f := range files {
		fu, fok, ferr := geminiSessionFile(f, sessionID, since)
		if ferr != nil {
			err = errors.Join(err, ferr)
			continue
		}
		if fok {
			u.add(fu)
			ok = true
		}
	}
	return u, ok, err
}

// geminiRecord declares what is read of a session file line.
type geminiRecord struct {
	SessionID string    `json:"sessionId"`
	ID        string    `json:"id"`
	Timestamp time.Time `json:"timestamp"`
	Type      string    `json:"type"`
	Tokens    *struct {
		Input    count `json:"input"`
		Output   count `json:"output"`
		Cached   count `json:"cached"`
		Thoughts count `json:"thoughts"`
	} `json:"tokens"`
}

func geminiSessionFile(path, sessionID string, since time.Time) (Usage, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return Usage{}, false, fmt.Errorf("open gemini session: %w", err)
	}
	defer f.Close()
	var (
		u     Usage
		found bool
		first = true
		seen  = map[string]bool{}
	)
	for whole, err := range sessionLines(f) {
		if err != nil {
			return Usage{}, false, fmt.Errorf("read gemini session: %w", err)
		}
		if len(bytes.TrimSpace(whole)) == 0 {
			continue
		}
		var rec geminiRecord
		ok := decode(whole, &rec)
		if first {
			// The header names the session; another session's file is
			// not ours.
			if !ok || rec.SessionID != sessionID {
				return Usage{}, false, nil
			}
			first = false
		} else if ok && rec.Type == "gemini" && rec.Tokens != nil && !rec.Timestamp.Before(since) && !seen[rec.ID] {
			seen[rec.ID] = rec.ID != ""
			t := rec.Tokens
			u.add(Usage{
				InputTokens:     max(0, t.Input.v-t.Cached.v),
				OutputTokens:    t.Output.v + t.Thoughts.v,
				CacheReadTokens: t.Cached.v,
				ReasoningTokens: t.Thoughts.v,
			})
			found = true
		}
	}
	return u, found, nil
}
