package api

import (
	"encoding/json"
	"testing"
)

func TestPushedTo(t *testing.T) {
	// A RUN_LANDED payload as a push records it (landing/push.go), and one
	// of a land without a push.
	pushed, err := json.Marshal(map[string]any{"run_id": "r", "branch": "loop/abc", "base_branch": "main", "commit": "c0ffee",
		"mode": "push", "verified": true, "tested_commit": "c0ffee",
		"push": &PushResult{Remote: "origin", URL: "/srv/repo.git", Branch: "loop/abc", Commit: "c0ffee"}})
	if err != nil {
		t.Fatal(err)
	}
	merged, err := json.Marshal(map[string]any{"run_id": "r", "branch": "loop/abc", "commit": "c0ffee", "mode": "merge"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, url, branch string
		payload           []byte
		want              string
		ok                bool
	}{
		{"the push to that branch at that url", "/srv/repo.git", "loop/abc", pushed, "c0ffee", true},
		{"another url", "/srv/other.git", "loop/abc", pushed, "", false},
		{"another branch", "/srv/repo.git", "loop/def", pushed, "", false},
		{"a land without a push", "/srv/repo.git", "loop/abc", merged, "", false},
		{"not JSON", "/srv/repo.git", "loop/abc", []byte(`{`), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := PushedTo(tc.payload, tc.url, tc.branch); got != tc.want || ok != tc.ok {
				t.Fatalf("PushedTo = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
