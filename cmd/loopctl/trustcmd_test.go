package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

func TestTrustCmd(t *testing.T) {
	ws := t.TempDir()
	f := newFakeAPI(t)
	files := []api.TrustFile{{Path: ws + "/.loop/config", Kind: "config",
		SHA256: strings.Repeat("ab", 32), Status: "new", Commands: []api.TrustCommand{{Key: "verify_command", Command: "go test ./..."}},
		EnvShown: []api.TrustSetting{{Key: "PATH", Value: "./bin:/usr/bin"}}, Values: []api.TrustSetting{{Key: "model", Value: "opus"}}}}
	f.handle("POST /v1/trust", func(w http.ResponseWriter, r *http.Request) {
		rep := api.TrustReport{Workspace: ws, Files: files, Recorded: true}
		if strings.Contains(r.URL.RawQuery+readBody(r), `"show":true`) {
			rep.Recorded = false
			rep.Agents = []api.TrustAgent{{Agent: "claude", Command: "claude -p --dangerously-skip-permissions", Default: true}}
		}
		writeJSON(w, http.StatusOK, rep)
	})
	loopctl(t, f, "trust", "-C", ws).expect(t, exitOK, lines(
		"trusted in "+ws+" — loopd will run what these files set:\n",
		".loop/config  (new, sha256 abababababab)\n", "  command  verify_command: go test ./...\n",
		"  environment  PATH=./bin:/usr/bin\n", "  setting  model=opus\n"))
	if req := decode[api.TrustRequest](t, f.only("POST", "/v1/trust")); req.Workspace != ws || req.Show {
		t.Errorf("trust sent %+v, want workspace %s", req, ws)
	}
	loopctl(t, f, "trust", "-C", ws, "--json").expect(t, exitOK, lines(`"sha256": "abab`))

	// --show asks for the report alone, and says that nothing was recorded.
	r := loopctl(t, f, "trust", "-C", ws, "--show")
	r.expect(t, exitOK, lines("would be trusted in "+ws+" — loopd would run what these files set:\n",
		"  agent=claude  (the workspace's agent)\n    claude -p --dangerously-skip-permissions\n",
		"nothing was recorded: `loopctl trust` trusts these files\n"))
	var shows []bool
	for _, req := range f.requests() {
		shows = append(shows, decode[api.TrustRequest](t, req).Show)
	}
	if len(shows) != 3 || shows[0] || shows[1] || !shows[2] {
		t.Errorf("trust, trust --json, trust --show sent show=%v", shows)
	}
}

func TestTrustCmdRevoke(t *testing.T) {
	ws := t.TempDir()
	f := newFakeAPI(t)
	f.reply("DELETE /v1/trust", api.RevokeReport{Workspace: ws, Revoked: []string{ws + "/.loop/config", "/elsewhere/env"}})
	loopctl(t, f, "trust", "-C", ws, "--revoke").expect(t, exitOK, lines("no longer trusted in "+ws+":\n  .loop/config\n  /elsewhere/env\n"))
	if q := f.only("DELETE", "/v1/trust").Query; q.Get("workspace") != ws {
		t.Errorf("revoke asked %v", q)
	}
	loopctl(t, f, "trust", "-C", ws, "--revoke", "--json").expect(t, exitOK, lines(`"revoked": [`))
	g := newFakeAPI(t)
	g.reply("DELETE /v1/trust", api.RevokeReport{Workspace: ws})
	loopctl(t, g, "trust", "-C", ws, "--revoke").expect(t, exitOK, lines("nothing was trusted in "+ws+"\n"))
}

func TestTrustCmdErrors(t *testing.T) {
	ws := t.TempDir()
	f := newFakeAPI(t)
	f.handle("POST /v1/trust", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": api.Error{Code: api.CodeBadRequest, Message: "bad config",
			Details: []string{".loop/config:3: unknown key \"modle\""}}})
	})
	loopctl(t, f, "trust", "-C", ws).expect(t, exitUsage, nil, "loopctl: bad config:\n  .loop/config:3: unknown key \"modle\"\n")
	loopctl(t, f, "trust", "extra").expect(t, exitUsage, nil, `unknown command "extra"`)
	f.fail("DELETE /v1/trust", api.CodeUnavailable, "the database is read-only")
	loopctl(t, f, "trust", "-C", ws, "--revoke").expect(t, exitUnavailable, nil, "the database is read-only")
}

// readBody is r's body, which stays readable.
func readBody(r *http.Request) string {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return string(b)
}
