package agent

import (
	"strings"
	"testing"
)

// sessionLines yields every line but the ones too long to hold usage,
// whatever the reader's buffer, and the last line without its newline.
func TestSessionLines(t *testing.T) {
	long := strings.Repeat("x", maxRolloutLine+1)
	in := "first\n\n" + long + "\n{\"second\":1}\nlast"
	var got []string
	for line, err := range sessionLines(strings.NewReader(in)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(line))
	}
	want := []string{"first\n", "\n", "{\"second\":1}\n", "last"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", got, want)
	}
}
