package transcript

import "strings"

// HasPromise reports whether the completion promise is the last non-empty
// line of message. Blanks around the line and around promise are ignored,
// and CRLF or CR line ends work like LF. Anything else on that line, or any
// non-blank line after it, means no: a promise mentioned in prose, quoted
// ("> <promise>…"), emphasised, or followed by more text does not count.
//
// A promise inside a fenced code block does not count either, because the
// closing fence is then the last line; one after an unclosed fence does,
// since only lines are compared. An empty or multi-line promise never
// matches.
func HasPromise(message, promise string) bool {
	promise = strings.TrimSpace(promise)
	if promise == "" || strings.ContainsAny(promise, "\r\n") {
		return false
	}
	return lastLine(message) == promise
}

// Question returns the question an agent's final message ends with: the
// text between <tag> and </tag>, where <tag> begins a line and </tag> ends
// the message (trailing blank space aside), so that a question quoted in
// prose or followed by more text does not count. The question may span
// lines; an empty one does not count.
func Question(message, tag string) (string, bool) {
	if tag == "" {
		return "", false
	}
	open, end := "<"+tag+">", "</"+tag+">"
	msg := strings.TrimRight(message, " \t\r\n")
	body, ok := strings.CutSuffix(msg, end)
	if !ok {
		return "", false
	}
	i := strings.LastIndex(body, open)
	if i < 0 || (i > 0 && body[i-1] != '\n') {
		return "", false
	}
	q := strings.TrimSpace(body[i+len(open):])
	if q == "" || strings.Contains(q, open) {
		return "", false
	}
	return q, true
}
