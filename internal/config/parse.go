package config

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// SetFile is the File of entries and errors that come from --set arguments.
const SetFile = "--set"

// maxLineBytes bounds one line of a config file.
const maxLineBytes = 1 << 20

// Entry is one key=value assignment and where it came from: a file and its
// 1-based line, or [SetFile] and the 1-based position among the --set
// arguments. Value is unquoted.
type Entry struct {
	// File is the config file's path, or SetFile.
	File string
	// Line is the 1-based line in File, or the position among the --set
	// arguments.
	Line int
	// Key is the key as written (trimmed).
	Key string
	// Value is the value, trimmed and unquoted.
	Value string
}

// String returns the entry as a config line, "key=value", quoting the value
// with [QuoteValue] when it needs it. Parse reads the line back as the same
// key and value, unless the value holds a newline (possible only from --set),
// which no single line can carry.
func (e Entry) String() string { return e.Key + "=" + QuoteValue(e.Value) }

// QuoteValue returns v in a form that reads back as exactly v, both in a
// config line and in a --set argument: v itself when it needs no quotes,
// otherwise v in single quotes, or in double quotes with \" and \\ escapes
// when v contains a single quote.
func QuoteValue(v string) string {
	if v == "" {
		return v
	}
	first, _ := utf8.DecodeRuneInString(v)
	last, _ := utf8.DecodeLastRuneInString(v)
	if !unicode.IsSpace(first) && !unicode.IsSpace(last) && first != '"' && first != '\'' &&
		StripComment(v) == v {
		return v
	}
	if !strings.Contains(v, "'") {
		return "'" + v + "'"
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// ParseFile reads the config file at path. It reports syntax errors only
// (unknown keys and bad values are found when the entries are applied, see
// [Load]). A file that cannot be opened gives a *ConfigError wrapping the
// cause, so errors.Is(err, fs.ErrNotExist) tells a missing file apart.
// Like [Parse], it returns the entries it could read together with the
// error.
//
// The file is opened with O_NONBLOCK and must be a regular file once
// open: a FIFO a repository puts at .loop/config would otherwise block
// the open, and the daemon with it.
func ParseFile(path string) ([]Entry, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileError(path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fileError(path, err)
	} else if fi.IsDir() {
		return nil, &ConfigError{File: path, Msg: "cannot read: is a directory"}
	} else if !fi.Mode().IsRegular() {
		return nil, &ConfigError{File: path, Msg: "cannot read: not a regular file"}
	}
	return Parse(f, path)
}

// fileError describes a file that cannot be read, without repeating its path.
func fileError(path string, err error) *ConfigError {
	msg := reason(err)
	if errors.Is(err, fs.ErrNotExist) {
		msg = "file does not exist"
	}
	return &ConfigError{File: path, Msg: "cannot read: " + msg, Err: err}
}

// Parse reads config lines from r; file names the source in entries and
// errors. The format:
//
//   - one key=value per line; blank lines are skipped;
//   - a line whose first non-blank character is '#' is a comment;
//   - a value may end with a comment: a '#' after a space or tab, outside
//     '…' and "…" quotes, starts it (see [StripComment]); a '#' right after
//     another character, as in a#b or http://host/#frag, or inside quotes,
//     is part of the value;
//   - whitespace around the key and around the value is trimmed;
//   - a value wholly enclosed in double quotes is unquoted, with \" and \\
//     as escapes (any other backslash is kept); a value wholly enclosed in
//     single quotes is taken literally; quotes only strip when they enclose
//     the whole value, so a command such as "./my tool" --flag keeps its
//     quotes; a value that opens a quote and never closes it is an error;
//   - a line without '=' is an error, and so is a key with spaces or quotes.
//
// Every syntax error is reported (joined, each a *ConfigError), and the
// entries of the lines that parsed are returned with them, so a caller can
// report every problem at once.
func Parse(r io.Reader, file string) ([]Entry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	var (
		entries []Entry
		errs    []error
		line    int
	)
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			text = strings.TrimPrefix(text, "\uFEFF") // a byte order mark some editors write
		}
		text = strings.TrimSpace(text)
		if text == "" || text[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(text, "="); ok {
			text = k + "=" + StripComment(v)
		}
		e, err := parseAssignment(text, file, line)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			errs = append(errs, &ConfigError{File: file, Line: line + 1, Msg: "line is longer than 1 MiB", Err: err})
		} else {
			errs = append(errs, &ConfigError{File: file, Msg: "cannot read: " + reason(err), Err: err})
		}
	}
	return entries, errors.Join(errs...)
}

// ParseSets parses "key=value" arguments of --set. Each follows the rules of
// a config line (trimming, quotes) except that '#' starts no comment (the
// shell has already removed the user's comments) and a value may span lines. Entries have File [SetFile] and Line the 1-based
// position. Like [Parse], it returns the entries that parsed with every
// error.
func ParseSets(sets []string) ([]Entry, error) {
	var (
		entries []Entry
		errs    []error
	)
	for i, s := range sets {
		e, err := parseAssignment(s, SetFile, i+1)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries = append(entries, e)
	}
	return entries, errors.Join(errs...)
}

// StripComment removes a trailing comment from the raw value of a config
// line (the text after its '='): a '#' that follows a space or tab and is
// not inside '…' or "…" quotes starts the comment, which runs to the end of
// the line. So
//
//	max_cost=10            # USD            → 10
//	verify_command=go test ./... # all      → go test ./...
//	review_command=grep -c '#' out          → unchanged: no space before #
//	prompt="fix issue # 12"                 → unchanged: the # is quoted
//	completion_promise=DONE#1               → unchanged: no space before #
//
// Quotes are tracked as a POSIX shell tracks them (\ escapes inside "…").
// When a quote is never closed — an apostrophe in prose, as in
// prompt=don't panic # note — quoting is ignored and the first " #" starts
// the comment, so an apostrophe cannot swallow a comment. The value is
// returned as it was, untrimmed, when it has no comment.
func StripComment(v string) string {
	cut := -1      // the first " #" outside quotes
	firstAny := -1 // the first " #" anywhere, for an unclosed quote
	var quote byte
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '#' && i > 0 && (v[i-1] == ' ' || v[i-1] == '\t') {
			if firstAny < 0 {
				firstAny = i
			}
			if quote == 0 {
				cut = i
				break
			}
		}
		switch {
		case quote == 0 && (c == '\'' || c == '"'):
			quote = c
		case quote == '"' && c == '\\':
			i++ // \" and \\ inside double quotes
		case quote != 0 && c == quote:
			quote = 0
		}
	}
	if cut < 0 && quote != 0 {
		cut = firstAny
	}
	if cut < 0 {
		return v
	}
	return v[:cut]
}

// parseAssignment parses one "key=value".
func parseAssignment(s, file string, line int) (Entry, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		msg := fmt.Sprintf("missing \"=\" in %q: a line is key=value", clip(s))
		if file == SetFile {
			msg = fmt.Sprintf("missing \"=\" in %q: use --set key=value", clip(s))
		}
		return Entry{}, &ConfigError{File: file, Line: line, Msg: msg}
	}
	k = strings.TrimSpace(k)
	if k == "" {
		return Entry{}, &ConfigError{File: file, Line: line, Msg: fmt.Sprintf("missing key before \"=\" in %q", clip(s))}
	}
	if !validKeyName(k) {
		msg := fmt.Sprintf("invalid key %q: keys have no spaces, quotes or control characters", clip(k))
		if s := suggestKey(k); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return Entry{}, &ConfigError{File: file, Line: line, Msg: msg}
	}
	value, msg := unquote(strings.TrimSpace(v))
	if msg != "" {
		return Entry{}, &ConfigError{File: file, Line: line, Key: k, Msg: msg}
	}
	if i := strings.IndexByte(value, 0); i >= 0 {
		// No command line, path or environment variable can carry a NUL:
		// accepted, it would fail every step with "invalid argument".
		return Entry{}, &ConfigError{File: file, Line: line, Key: k,
			Msg: fmt.Sprintf("value contains a NUL byte (at byte %d): remove it", i+1)}
	}
	return Entry{File: file, Line: line, Key: k, Value: value}, nil
}

// validKeyName reports whether k can be a key: printable, without spaces or
// quotes, not starting with the comment character. Unknown but well-formed
// keys are rejected later, with a suggestion.
func validKeyName(k string) bool {
	if k == "" || k[0] == '#' {
		return false
	}
	for _, r := range k {
		if !unicode.IsPrint(r) || r == ' ' || r == '"' || r == '\'' || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// unquote applies the quoting rules of [Parse] to a trimmed value. It returns
// a message for an unterminated quote.
func unquote(v string) (string, string) {
	if v == "" {
		return "", ""
	}
	switch v[0] {
	case '\'':
		end := strings.IndexByte(v[1:], '\'')
		if end < 0 {
			return "", `unterminated ' quote: close it, or quote the whole value with "…"`
		}
		if end+1 == len(v)-1 {
			return v[1 : len(v)-1], ""
		}
		return v, "" // a quoted word followed by more: the value is literal
	case '"':
		for i := 1; i < len(v); i++ {
			switch v[i] {
			case '\\':
				i++ // skip the escaped character
			case '"':
				if i == len(v)-1 {
					return unescape(v[1:i]), ""
				}
				return v, "" // a quoted word followed by more: the value is literal
			}
		}
		return "", `unterminated " quote: close it (escape a quote inside with \"), or quote the whole value with '…'`
	}
	return v, ""
}

// unescape resolves \" and \\ in the body of a double-quoted value; any other
// backslash is kept, as in a POSIX shell's double quotes.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// clip shortens s for an error message.
func clip(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
