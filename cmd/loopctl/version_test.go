package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// loopctl --version and loopctl version print the same version, and the
// version command starts no daemon: with no socket to answer, it still
// prints loopctl's own version and exits 0.
func TestVersion(t *testing.T) {
	t.Setenv("LOOPD_SOCKET", t.TempDir()+"/none.sock")
	t.Setenv("LOOPCTL_NO_AUTOSTART", "1")
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out, errOut bytes.Buffer
		root := newRootCmd(&out, &errOut)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("loopctl %v: %v (stderr %q)", args, err, errOut.String())
		}
		if want := "loopctl " + api.VersionLine() + "\n"; out.String() != want {
			t.Fatalf("loopctl %v printed %q, want %q", args, out.String(), want)
		}
	}
	var out bytes.Buffer
	root := newRootCmd(&out, &out)
	root.SetArgs([]string{"version", "--json"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var v map[string]string
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v["loopctl"] != api.BuildVersion() {
		t.Fatalf("version --json = %q (%v), want loopctl=%q", out.String(), err, api.BuildVersion())
	}
	if _, ok := v["loopd"]; ok {
		t.Fatalf("version --json names a loopd with no daemon running: %q", out.String())
	}
}
