package trust

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A verdict's wire form lists every list (empty, not null, so loopctl and
// scripts need no nil case) and says when the file was trusted before
// only when it was.
func TestVerdictWire(t *testing.T) {
	b, err := json.Marshal(Verdict{File: File{Path: ".loop/config.toml", Kind: KindConfig}, Status: StatusNew}.Wire())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"commands":[]`, `"env":[]`, `"settings":[]`, `"env_shown":[]`, `"values":[]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("a new file's verdict %s lacks %s", b, want)
		}
	}
	if !strings.Contains(string(b), `"previously_trusted_at":null`) {
		t.Errorf("a new file's verdict names a time it was trusted: %s", b)
	}

	at := time.Unix(1_700_000_000, 0)
	got := Verdict{File: File{Path: "stop.json", Kind: KindStop, Commands: []Command{{Key: "conditions[0]", Command: "./check"}},
		Values: []Setting{{Key: "model", Value: "m"}}, EnvShown: []Setting{{Key: "PATH", Value: "./bin"}}},
		Status: StatusChanged, TrustedAt: at, Changes: []string{"command conditions[0]"}}.Wire()
	if got.PreviouslyTrustedAt == nil || !got.PreviouslyTrustedAt.Time.Equal(at) {
		t.Errorf("a changed file's verdict: trusted before at %v, want %v", got.PreviouslyTrustedAt, at)
	}
	if len(got.Commands) != 1 || got.Commands[0].Key != "conditions[0]" || got.Commands[0].Command != "./check" ||
		len(got.Values) != 1 || got.Values[0].Value != "m" || len(got.EnvShown) != 1 || got.EnvShown[0].Value != "./bin" ||
		got.Status != "changed" || got.Kind != "stop" || len(got.Changes) != 1 {
		t.Errorf("a changed file's verdict: %+v", got)
	}
}
