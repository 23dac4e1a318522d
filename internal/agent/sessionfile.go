package agent

import (
	"bufio"
	"errors"
	"io"
	"iter"

	"github.com/loopd/loopd/internal/transcript"
)

// maxRolloutLine bounds one buffered session file line; longer lines (a
// big tool output) never hold usage and are skipped.
const maxRolloutLine = 4 << 20

// sessionLines yields each non-empty line of an agent's session file (with
// its newline, if any) for the Codex and Gemini session readers. A line
// longer than maxRolloutLine is read and dropped, so memory does not
// depend on the file. A read error other than EOF is yielded once, last.
// A yielded line is valid until the next one.
func sessionLines(r io.Reader) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		var line []byte
		skipping := false // the current line outgrew maxRolloutLine
		for {
			chunk, err := br.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				if !skipping && len(line)+len(chunk) <= maxRolloutLine {
					line = append(line, chunk...)
				} else {
					skipping, line = true, nil
				}
				continue
			}
			if err != nil && !errors.Is(err, io.EOF) {
				yield(nil, err)
				return
			}
			// The line's last chunk counts toward the bound too.
			skipping = skipping || len(line)+len(chunk) > maxRolloutLine
			whole := chunk
			if len(line) > 0 && !skipping {
				whole = append(line, chunk...)
			}
			if !skipping && len(whole) > 0 && !yield(whole, nil) {
				return
			}
			line, skipping = line[:0], false
			if err != nil { // io.EOF
				return
			}
		}
	}
}

// sumSessionFiles adds up the usage that read finds in each of files, in
// order: ok when any file held usage. A file that cannot be read adds its
// error to err and the others still count, so one unreadable session file
// does not lose the tokens the rest recorded.
func sumSessionFiles(files []string, read func(path string) (transcript.Usage, bool, error)) (u transcript.Usage, ok bool, err error) {
	for _, f := range files {
		fu, fok, ferr := read(f)
		if ferr != nil {
			err = errors.Join(err, ferr)
			continue
		}
		if fok {
			u.Add(fu)
			ok = true
		}
	}
	return u, ok, err
}
