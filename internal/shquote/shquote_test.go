package shquote

import (
	"os/exec"
	"testing"
)

// What Quote returns, a shell reads back as the string it was given.
func TestQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"loop/abc123", "loop/abc123"},
		{"claude-opus-4-5", "claude-opus-4-5"},
		{"openai/gpt-4.1", "openai/gpt-4.1"},
		{"model@2024:latest", "model@2024:latest"},
		{"$(id)", "'$(id)'"},
		{"a=b:c,d@e%f+g", "a=b:c,d@e%f+g"},
		{"", "''"},
		{"two words", "'two words'"},
		{"it's", `'it'\''s'`},
		{"$HOME;rm -rf /", "'$HOME;rm -rf /'"},
	}
	for _, tt := range tests {
		got := Quote(tt.in)
		if got != tt.want {
			t.Errorf("Quote(%q) = %s, want %s", tt.in, got, tt.want)
		}
		out, err := exec.Command("sh", "-c", "printf %s "+got).Output()
		if err != nil || string(out) != tt.in {
			t.Errorf("sh read %s back as %q (%v), want %q", got, out, err, tt.in)
		}
	}
}
