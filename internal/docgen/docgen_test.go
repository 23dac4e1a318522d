package docgen

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/stop"
)

const root = "../.."

// The checked-in reference pages are exactly what the code generates: a
// key, default, condition, status or event changed without regenerating
// the docs fails here.
func TestDocsAreUpToDate(t *testing.T) {
	pages, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for page, want := range pages {
		got, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Errorf("%s: %v; run go run ./internal/docgen/gendocs", page, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go run ./internal/docgen/gendocs from the repository root\nfirst difference: %s", page, firstDiff(got, want))
		}
	}
}

// The generated pages name every key with its default, every condition
// with its JSON, and every event: the generator drops nothing.
func TestPagesCoverTheCode(t *testing.T) {
	pages, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(pages["docs/configuration.md"])
	for _, k := range config.Reference() {
		if row := "| `" + k.Key + "` | " + value(k.Default) + " |"; !strings.Contains(cfg, row) {
			t.Errorf("configuration.md lacks the row of %s starting %q", k.Key, row)
		}
	}
	if !strings.Contains(cfg, "| `max_iterations` | `50` |") || !strings.Contains(cfg, "| `completion` | `promise,verify,review` |") {
		t.Errorf("configuration.md does not show the defaults of config.Default():\n%s", cfg)
	}
	conds := string(pages["docs/stop-conditions.md"])
	for _, ty := range stop.Types() {
		if !strings.Contains(conds, `"type": "`+string(ty)+`"`) {
			t.Errorf("stop-conditions.md has no JSON example of %s", ty)
		}
	}
	ref := string(pages["docs/reference.md"])
	for _, want := range []string{"`RUN_COMPLETED`", "`DAEMON_STARTED`", "| `FAILED` |", "| 69 |", "| `verification` |"} {
		if !strings.Contains(ref, want) {
			t.Errorf("reference.md lacks %q", want)
		}
	}
}

func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n  checked in: " + x + "\n  generated:  " + y
		}
	}
	return "(none)"
}
