package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/joho/godotenv"
)

// LoadEnvFile reads a dotenv file with godotenv (NAME=value lines, comments,
// quotes, "export" prefixes, ${VAR} expansion within the file) and returns
// its variables as "NAME=value" strings sorted by name, ready to append to a
// command's environment. Errors are *ConfigError naming the file and, when
// it can be found, the line. They never quote values, which may be secrets.
func LoadEnvFile(path string) ([]string, error) {
	data, err := readFileLimited(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	return ParseEnvFile(path, data)
}

// ParseEnvFile is [LoadEnvFile] of the bytes data already read from path
// (by a caller that also hashes them, so that what is checked is what is
// loaded).
func ParseEnvFile(path string, data []byte) ([]string, error) {
	if len(data) > maxEnvFileBytes {
		return nil, fileError(path, errors.New("file is larger than 1 MiB"))
	}
	if err := CheckEnvLineBreaks(path, data); err != nil {
		return nil, err
	}
	vars, err := godotenv.UnmarshalBytes(data)
	if err != nil {
		msg, line := describeEnvError(data, err)
		// err is kept for Unwrap but not printed: godotenv quotes the rest of
		// the file in its messages.
		return nil, &ConfigError{File: path, Line: line, Msg: "invalid env file: " + msg, Err: err}
	}
	env := make([]string, 0, len(vars))
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		value := vars[name]
		switch {
		case name == "":
			return nil, &ConfigError{File: path, Line: lastStatementLine(data), Msg: `invalid env file: a line has no "=" (expected NAME=value)`}
		case strings.ContainsRune(value, 0):
			return nil, &ConfigError{File: path, Key: name, Msg: "invalid env file: the value contains a NUL byte"}
		}
		env = append(env, name+"="+value)
	}
	return env, nil
}

// maxEnvFileBytes bounds an env file read into memory.
const maxEnvFileBytes = 1 << 20

// readFileLimited reads a whole regular file of at most maxEnvFileBytes.
func readFileLimited(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file") // opening a FIFO would block
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxEnvFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxEnvFileBytes {
		return nil, errors.New("file is larger than 1 MiB")
	}
	return data, nil
}

// describeEnvError turns a godotenv error into a message without file
// content, and the 1-based line it refers to (0 when unknown). godotenv's
// messages carry the rest of the file ("near %q") or the rest of a line
// ("unterminated quoted value %s"), which locates the line.
func describeEnvError(data []byte, err error) (string, int) {
	src := bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")) // as godotenv sees it
	lineAt := func(offset int) int { return 1 + bytes.Count(src[:offset], []byte("\n")) }
	text := err.Error()

	if head, near, ok := strings.Cut(text, " near "); ok && strings.HasPrefix(head, "unexpected character ") {
		line := 0
		if rest, uerr := strconv.Unquote(near); uerr == nil && bytes.HasSuffix(src, []byte(rest)) {
			line = lineAt(len(src) - len(rest))
		}
		char, _ := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(head, "unexpected character "), " in variable name"))
		switch {
		case char == "\n":
			return `a line has no "=" (expected NAME=value)`, line
		case char != "":
			return fmt.Sprintf("unexpected character %q in a variable name (names are letters, digits, '_' and '.')", char), line
		}
		return "invalid variable name", line
	}
	if rest, ok := strings.CutPrefix(text, "unterminated quoted value "); ok {
		line := 0
		if i := bytes.LastIndex(src, []byte(rest)); i >= 0 && rest != "" {
			line = lineAt(i)
		}
		return "unterminated quoted value", line
	}
	return "cannot parse", 0
}

// lastStatementLine returns the line of the last line that is neither blank
// nor a comment: where godotenv ends up when a final line has no "=".
func lastStatementLine(data []byte) int {
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(lines[i]); t != "" && !strings.HasPrefix(t, "#") {
			return i + 1
		}
	}
	return 0
}

// CheckEnvLineBreaks refuses an env file holding a line break that
// godotenv does not take as one: a lone CR, U+2028 or U+2029. Gemini CLI
// reads .env files with the JavaScript dotenv, whose line pattern ends a
// line at each of them; godotenv does not. So `LOG_LEVEL=info # note`,
// U+2029, `BASH_ENV=/x` is one variable to loopd (and to what loopctl
// trust shows) and two to Gemini CLI. The error names the file and the
// 1-based line (counted in \n) where the first one is.
func CheckEnvLineBreaks(path string, data []byte) error {
	line := 1
	for i := 0; i < len(data); i++ {
		var what string
		switch {
		case data[i] == '\n':
			line++
			continue
		case data[i] == '\r' && (i+1 == len(data) || data[i+1] != '\n'):
			what = "a carriage return not followed by a newline"
		case data[i] == 0xe2 && i+2 < len(data) && data[i+1] == 0x80 && (data[i+2] == 0xa8 || data[i+2] == 0xa9):
			what = fmt.Sprintf("U+%04X (a line break to other dotenv readers)", 0x2000+int(data[i+2])-0x80)
		default:
			continue
		}
		return &ConfigError{File: path, Line: line, Msg: "invalid env file: " + what +
			"; Gemini CLI would start a new line there and read a variable loopd does not see: use plain newlines"}
	}
	return nil
}

// WrittenEnvValues returns the values of the env file at path as they are
// written in it, "NAME=text", for redaction: a value written with escapes
// or quotes ("-----BEGIN…\nMHcC…" on one line) is not its parsed value,
// and output that prints the file (cat .env, a config dump) shows the text.
// For a quoted value both the text inside the quotes and the quoted text
// are returned. An unreadable file gives none; only NAME=value lines are
// read (a value's continuation lines are covered by its parsed value).
func WrittenEnvValues(path string) []string {
	if path == "" {
		return nil
	}
	data, err := readFileLimited(path)
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		line = strings.TrimPrefix(line, "export ")
		name, text, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		text = strings.TrimSpace(text)
		out = append(out, name+"="+text)
		if len(text) >= 2 && (text[0] == '"' || text[0] == '\'') {
			if end := strings.LastIndexByte(text, text[0]); end > 0 {
				out = append(out, name+"="+text[1:end])
			}
		}
	}
	return out
}
