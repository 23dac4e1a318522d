package testreport

import "testing"

// The directive is found the way TAP::Parser finds it: after the first
// unescaped '#', in any case, with or without a dash or a space before
// the '#', ending at a word boundary.
func TestTAPDirective(t *testing.T) {
	tests := []struct {
		name, text, desc, directive string
	}{
		{"upper case after a dash", "- # SKIP no /sys directory", "-", "SKIP"},
		{"lower case, no dash", "# skip no network", "", "SKIP"},
		{"mixed case TODO", "infinite loop # ToDo halting problem", "infinite loop", "TODO"},
		{"dash glued to the hash", "-# SKIP", "-", "SKIP"},
		{"no space before the hash", "name #SKIP", "name", "SKIP"},
		{"TODO with a colon", "broken # TODO: later", "broken", "TODO"},
		{"TODO and SKIP from todo_skip", "# TODO & SKIP why", "", "TODO"},
		{"a word that starts with skip", "name # Skipped it", "name # Skipped it", ""},
		{"an issue number", "fixes #42", "fixes #42", ""},
		{"an escaped hash", `name \# SKIP`, `name \# SKIP`, ""},
		{"a bare hash", "name #", "name #", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desc, dir := tapDirective(tt.text)
			if desc != tt.desc || dir != tt.directive {
				t.Errorf("tapDirective(%q) = %q, %q; want %q, %q", tt.text, desc, dir, tt.desc, tt.directive)
			}
		})
	}
}
