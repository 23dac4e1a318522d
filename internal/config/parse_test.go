package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []Entry
	}{
		{
			name:  "empty",
			input: "",
			want:  nil,
		},
		{
			name:  "comments and blank lines",
			input: "# a comment\n\n   \n  # indented comment\nmodel=x\n\t\n",
			want:  []Entry{{File: "f", Line: 5, Key: "model", Value: "x"}},
		},
		{
			name:  "whitespace around key and value",
			input: "  max_iterations   =   10  \n\tmodel\t=\tm\t\n",
			want: []Entry{
				{File: "f", Line: 1, Key: "max_iterations", Value: "10"},
				{File: "f", Line: 2, Key: "model", Value: "m"},
			},
		},
		{
			name:  "a trailing comment after a space or tab",
			input: "verify_command=make test # all of them\nmax_cost=10\t# USD\nenv_file= # off\nagent=claude   # claude, codex or command\n",
			want: []Entry{
				{File: "f", Line: 1, Key: "verify_command", Value: "make test"},
				{File: "f", Line: 2, Key: "max_cost", Value: "10"},
				{File: "f", Line: 3, Key: "env_file", Value: ""},
				{File: "f", Line: 4, Key: "agent", Value: "claude"},
			},
		},
		{
			name: "a hash without a space before it, or inside quotes, is part of the value",
			input: "review_command=grep -c '#' x\ncompletion_promise=DONE#1\nprompt=\"fix issue # 12\"\n" +
				"verify_command=grep -q \"a # b\" f # checks\nverify_command='#x' # c\nprompt=http://host/#frag\n",
			want: []Entry{
				{File: "f", Line: 1, Key: "review_command", Value: "grep -c '#' x"},
				{File: "f", Line: 2, Key: "completion_promise", Value: "DONE#1"},
				{File: "f", Line: 3, Key: "prompt", Value: "fix issue # 12"},
				{File: "f", Line: 4, Key: "verify_command", Value: `grep -q "a # b" f`},
				{File: "f", Line: 5, Key: "verify_command", Value: "#x"},
				{File: "f", Line: 6, Key: "prompt", Value: "http://host/#frag"},
			},
		},
		{
			name:  "an apostrophe cannot swallow a comment",
			input: "prompt=don't panic # a note\n",
			want:  []Entry{{File: "f", Line: 1, Key: "prompt", Value: "don't panic"}},
		},
		{
			name:  "equals sign inside a value",
			input: "verify_command=FOO=1 go test ./...\n",
			want:  []Entry{{File: "f", Line: 1, Key: "verify_command", Value: "FOO=1 go test ./..."}},
		},
		{
			name:  "empty value",
			input: "verify_command=\nprompt =  \n",
			want: []Entry{
				{File: "f", Line: 1, Key: "verify_command", Value: ""},
				{File: "f", Line: 2, Key: "prompt", Value: ""},
			},
		},
		{
			name: "double quotes with escapes",
			input: `prompt="  keep the spaces  "` + "\n" +
				`completion_promise="say \"done\" \\ now"` + "\n" +
				`verify_command="C:\path\n"` + "\n" +
				`prompt=""` + "\n",
			want: []Entry{
				{File: "f", Line: 1, Key: "prompt", Value: "  keep the spaces  "},
				{File: "f", Line: 2, Key: "completion_promise", Value: `say "done" \ now`},
				{File: "f", Line: 3, Key: "verify_command", Value: `C:\path\n`},
				{File: "f", Line: 4, Key: "prompt", Value: ""},
			},
		},
		{
			name:  "single quotes are literal",
			input: `verify_command='echo "$HOME" \n'` + "\n" + `prompt=''` + "\n",
			want: []Entry{
				{File: "f", Line: 1, Key: "verify_command", Value: `echo "$HOME" \n`},
				{File: "f", Line: 2, Key: "prompt", Value: ""},
			},
		},
		{
			name: "quotes that do not enclose the whole value are kept",
			input: `verify_command="./my tool" --flag` + "\n" +
				`review_command='a' && 'b'` + "\n" +
				`agent_command=claude -p "$(cat x)"` + "\n",
			want: []Entry{
				{File: "f", Line: 1, Key: "verify_command", Value: `"./my tool" --flag`},
				{File: "f", Line: 2, Key: "review_command", Value: `'a' && 'b'`},
				{File: "f", Line: 3, Key: "agent_command", Value: `claude -p "$(cat x)"`},
			},
		},
		{
			name:  "CRLF line endings and a byte order mark",
			input: "\uFEFFmodel=a\r\nmax_iterations=3\r\n",
			want: []Entry{
				{File: "f", Line: 1, Key: "model", Value: "a"},
				{File: "f", Line: 2, Key: "max_iterations", Value: "3"},
			},
		},
		{
			name:  "keys are kept as written, checked later",
			input: "price.gpt-4.1=2,8\nfrobnicate=1\n",
			want: []Entry{
				{File: "f", Line: 1, Key: "price.gpt-4.1", Value: "2,8"},
				{File: "f", Line: 2, Key: "frobnicate", Value: "1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.input), "f")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse =\n%#v\nwant\n%#v", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name      string
		input     string
		wantErr   string
		wantCount int // entries that still parsed
	}{
		{
			name:      "line without equals",
			input:     "model=a\nmax_iterations 5\n",
			wantErr:   `f:2: missing "=" in "max_iterations 5": a line is key=value`,
			wantCount: 1,
		},
		{
			name:    "missing key",
			input:   "= 5\n",
			wantErr: `f:1: missing key before "=" in "= 5"`,
		},
		{
			name:    "key with a space",
			input:   "max iterations=5\n",
			wantErr: `f:1: invalid key "max iterations": keys have no spaces, quotes or control characters (did you mean "max_iterations"?)`,
		},
		{
			name:    "unterminated double quote",
			input:   "prompt=\"fix the bug\n",
			wantErr: `f:1: prompt: unterminated " quote: close it (escape a quote inside with \"), or quote the whole value with '…'`,
		},
		{
			name:    "escaped closing quote leaves the quote open",
			input:   `prompt="abc\"` + "\n",
			wantErr: `f:1: prompt: unterminated " quote: close it (escape a quote inside with \"), or quote the whole value with '…'`,
		},
		{
			name:    "unterminated single quote",
			input:   "verify_command='go test\n",
			wantErr: `f:1: verify_command: unterminated ' quote: close it, or quote the whole value with "…"`,
		},
		{
			name:      "every error at once",
			input:     "a\nmodel=x\nb\nprompt='\n",
			wantErr:   "f:1: missing \"=\" in \"a\": a line is key=value\nf:3: missing \"=\" in \"b\": a line is key=value\nf:4: prompt: unterminated ' quote: close it, or quote the whole value with \"…\"",
			wantCount: 1,
		},
		{
			name:      "NUL byte in a value",
			input:     "model=a\nagent_command=my-agent\x00 --fast\n",
			wantErr:   `f:2: agent_command: value contains a NUL byte (at byte 9): remove it`,
			wantCount: 1,
		},
		{
			name:    "line too long",
			input:   "prompt=" + strings.Repeat("x", maxLineBytes) + "\n",
			wantErr: `f:1: line is longer than 1 MiB`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.input), "f")
			if err == nil {
				t.Fatalf("Parse = %v, want error %q", got, tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Fatalf("Parse error:\n%s\nwant:\n%s", err, tt.wantErr)
			}
			if len(got) != tt.wantCount {
				t.Fatalf("Parse returned %d entries with the error, want %d", len(got), tt.wantCount)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *ConfigError", err)
			}
		})
	}
}

func TestParseFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, []byte("model=a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{File: path, Line: 1, Key: "model", Value: "a"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseFile = %v, want %v", got, want)
	}

	missing := filepath.Join(dir, "missing")
	_, err = ParseFile(missing)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ParseFile(missing) error %v does not wrap fs.ErrNotExist", err)
	}
	if want := missing + ": cannot read: file does not exist"; err.Error() != want {
		t.Fatalf("ParseFile(missing) error %q, want %q", err, want)
	}

	_, err = ParseFile(dir)
	if want := dir + ": cannot read: is a directory"; err == nil || err.Error() != want {
		t.Fatalf("ParseFile(dir) error %v, want %q", err, want)
	}
}

func TestParseSets(t *testing.T) {
	got, err := ParseSets([]string{"model=a", " max_cost = $5 ", "prompt=line one\nline two", `prompt_file="my goal.md"`, "verify_command=echo # not a comment"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{File: SetFile, Line: 1, Key: "model", Value: "a"},
		{File: SetFile, Line: 2, Key: "max_cost", Value: "$5"},
		{File: SetFile, Line: 3, Key: "prompt", Value: "line one\nline two"},
		{File: SetFile, Line: 4, Key: "prompt_file", Value: "my goal.md"},
		{File: SetFile, Line: 5, Key: "verify_command", Value: "echo # not a comment"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseSets =\n%v\nwant\n%v", got, want)
	}

	_, err = ParseSets([]string{"model=a", "max_iterations", "", "#x=1"})
	wantErr := "--set 2: missing \"=\" in \"max_iterations\": use --set key=value\n" +
		"--set 3: missing \"=\" in \"\": use --set key=value\n" +
		"--set 4: invalid key \"#x\": keys have no spaces, quotes or control characters"
	if err == nil || err.Error() != wantErr {
		t.Fatalf("ParseSets error:\n%v\nwant:\n%s", err, wantErr)
	}
}

func TestQuoteValue(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"go test ./...", "go test ./..."},
		{`"./my tool" --flag`, `'"./my tool" --flag'`},
		{" padded ", "' padded '"},
		{"it's", "it's"},
		{"'quoted' it's ", `"'quoted' it's "`},
		{`"a\b" it's `, `"\"a\\b\" it's "`},
		{"# not a comment", "# not a comment"},
		{"make # all", "'make # all'"},
		{"it's # here", `"it's # here"`},
		{"a#b", "a#b"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := QuoteValue(tt.in)
			if got != tt.want {
				t.Fatalf("QuoteValue(%q) = %q, want %q", tt.in, got, tt.want)
			}
			entries, err := ParseSets([]string{"prompt=" + got})
			if err != nil || entries[0].Value != tt.in {
				t.Fatalf("--set of %q read back as %v, %v", got, entries, err)
			}
			e := Entry{Key: "prompt", Value: tt.in}
			entries, err = Parse(strings.NewReader(e.String()), "f")
			if err != nil || len(entries) != 1 || entries[0].Value != tt.in {
				t.Fatalf("line %q read back as %v, %v", e.String(), entries, err)
			}
		})
	}
}

// FuzzParse checks that Parse never panics, that every error is a located
// *ConfigError, and that every accepted line round-trips through
// Entry.String.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"model=claude-opus-4-5",
		"# comment\n\nmax_iterations = 10\n",
		`prompt="say \"hi\" \\ there"`,
		`verify_command='go test ./...'`,
		`verify_command="./my tool" --flag`,
		"prompt=\"unterminated",
		"no equals sign",
		"=value",
		"\uFEFFkey=value\r\n",
		"price.gpt-4o = 2.5, 10",
		"k=  'a' ",
		"k=\"\\\"\"",
		"verify_command=go test ./... # all\nprompt=\"a # b\" # c\nprompt=don't # x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		entries, err := Parse(strings.NewReader(input), "f")
		for _, e := range flatten(err) {
			var ce *ConfigError
			if !errors.As(e, &ce) || ce.File != "f" {
				t.Fatalf("error %v is not a *ConfigError naming the file", e)
			}
		}
		for _, e := range entries {
			line := e.String()
			back, err := Parse(strings.NewReader(line), "f")
			if err != nil {
				t.Fatalf("entry %+v written as %q does not parse: %v", e, line, err)
			}
			if len(back) != 1 || back[0].Key != e.Key || back[0].Value != e.Value {
				t.Fatalf("entry %+v written as %q reads back as %+v", e, line, back)
			}
		}
	})
}
