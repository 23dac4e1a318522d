package supervise

import "testing"

func TestSimple(t *testing.T) {
	tests := []struct {
		cmd  string
		want bool
	}{
		{"true", true},
		{"go test ./...", true},
		{"claude -p --output-format stream-json --verbose --model 'claude-sonnet-4-5' --dangerously-skip-permissions", true},
		{`codex exec --json --model "gpt-5" --sandbox workspace-write -`, true},
		{"/usr/bin/pytest -q tests/test_x.py::test_y", true},
		{"npm test -- --runInBand", true},
		{"exec claude -p", false},
		{"trap 'rm -f x' EXIT", false},
		{"exit 3", false},
		{". ./env.sh", false},
		{"source env.sh", false},
		{"eval $AGENT", false},
		{"command exec x", false},
		{"kill $$", false},
		{"cd sub", false},
		{"FOO=1 make", false},
		{"$AGENT --flag", false},
		{`claude "$(cat prompt)"`, false},
		{"claude `cat prompt`", false},
		{"make test; echo done", false},
		{"make && echo done", false},
		{"make || true", false},
		{"make | tee log", false},
		{"make > log", false},
		{"(make)", false},
		{"{ make; }", false},
		{"rm *.o", false},
		{"echo ~", false},
		{`echo "a\"b"`, false},
		{"echo 'unterminated", false},
		{"echo 'a b' \"c d\"", true},
		{"echo 'a;b $x `y`'", true}, // literal inside single quotes
		{"make\necho", false},
		{"", false},
		{"   ", false},
		{"echo # comment", false},
	}
	for _, tt := range tests {
		if got := simple(tt.cmd); got != tt.want {
			t.Errorf("simple(%q) = %v, want %v", tt.cmd, got, tt.want)
		}
	}
}
