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
