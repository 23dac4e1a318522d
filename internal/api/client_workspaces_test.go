package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"
)

func landServer(t *testing.T, lines []LandMessage, gap time.Duration, hang bool) *Client {
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for i, m := range lines {
			if i > 0 {
				time.Sleep(gap)
			}
			_ = json.NewEncoder(w).Encode(m)
			w.(http.Flusher).Flush()
		}
		if hang {
			<-r.Context().Done()
		}
	}))
}

// A land may take far longer than the ordinary timeout as long as the
// daemon keeps reporting progress.
func TestLandOutlastsTheTimeoutWhileProgressFlows(t *testing.T) {
	old := landProgress
	landProgress = 100 * time.Millisecond
	t.Cleanup(func() { landProgress = old })
	c := landServer(t, []LandMessage{{Progress: "one"}, {Progress: "two"}, {Progress: "three"},
		{Result: &LandResult{RunID: "abc", Mode: "merge", Verified: true}}}, 120*time.Millisecond, false)
	c.SetTimeout(50 * time.Millisecond)
	var got []string
	res, ref, err := c.Land(t.Context(), RunRef{Ref: "abc"}, LandRequest{}, func(s string) { got = append(got, s) })
	if err != nil || ref != nil || res == nil || res.Mode != "merge" || len(got) != 3 {
		t.Fatalf("Land = %+v, %+v, %v; progress %q", res, ref, err, got)
	}
}

// A daemon that goes silent mid-land is ErrNoAnswer, not a hang.
func TestLandSilenceIsNoAnswer(t *testing.T) {
	old := landProgress
	landProgress = 50 * time.Millisecond
	t.Cleanup(func() { landProgress = old })
	c := landServer(t, []LandMessage{{Progress: "one"}}, 0, true)
	c.SetTimeout(50 * time.Millisecond)
	_, _, err := c.Land(t.Context(), RunRef{Ref: "abc"}, LandRequest{}, nil)
	if !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("err = %v, want ErrNoAnswer", err)
	}
}

// A refusal comes back as a refusal, not an error.
func TestLandRefusal(t *testing.T) {
	c := landServer(t, []LandMessage{{Refusal: &LandRefusal{Kind: "dirty", Message: "uncommitted"}}}, 0, false)
	res, ref, err := c.Land(t.Context(), RunRef{Ref: "abc"}, LandRequest{}, nil)
	if err != nil || res != nil || ref == nil || ref.Kind != "dirty" {
		t.Fatalf("Land = %+v, %+v, %v", res, ref, err)
	}
}
