package filetail

import (
	"errors"
	"io"
	"os"
	"unicode/utf8"
)

// Follower reads a file that grows while it is read (a step's log: the
// step's processes write it directly, so growth is observed, not
// announced) from where its last read stopped. It is the one step-log
// follower of `loopctl logs` and of the dashboard's log tail.
//
// It hands out what it reads in pieces that never split a UTF-8
// character: a character cut by the end of a read is held back until the
// rest of it is written, so every piece is text a client can show (a
// JSON string, a server-sent event) without mangling it.
type Follower struct {
	path    string
	backlog int64
	f       *os.File
	buf     []byte
	pending []byte // the start of a character cut by the end of a read
	cut     bool   // the read starts mid-file, maybe mid-character
}

// ellipsis begins a tail that starts mid-file.
const ellipsis = "…"

// Follow returns a Follower of the file at path that reads up to chunk
// bytes at a time. The file need not exist yet. With backlog > 0 the
// reading starts at most backlog bytes before the end the file has when it
// is opened; a start mid-file drops the rest of a character it falls in
// and is marked with "…".
func Follow(path string, chunk int, backlog int64) *Follower {
	return &Follower{path: path, backlog: backlog, buf: make([]byte, chunk)}
}

// Open opens the file if it is not open yet, and returns why it cannot be:
// an error satisfying errors.Is(err, fs.ErrNotExist) when it is not
// written yet.
func (f *Follower) Open() error {
	if f.f != nil {
		return nil
	}
	file, err := os.Open(f.path)
	if err != nil {
		return err
	}
	if f.backlog > 0 {
		if fi, err := file.Stat(); err == nil && fi.Size() > f.backlog {
			_, _ = file.Seek(fi.Size()-f.backlog, io.SeekStart)
			f.cut = true
		}
	}
	f.f = file
	return nil
}

// Read passes emit each piece of what the file has gained since the last
// Read, up to its end for now, and returns the first error emit returns.
// A file that cannot be opened yet is not an error: it has nothing to read
// so far. A failed read is returned as it is.
func (f *Follower) Read(emit func([]byte) error) error {
	if f.Open() != nil {
		return nil
	}
	for {
		n, err := f.f.Read(f.buf)
		if n > 0 {
			data := f.buf[:n]
			if f.cut {
				for len(data) > 0 && !utf8.RuneStart(data[0]) {
					data = data[1:]
				}
				f.pending, f.cut = append([]byte(ellipsis), f.pending...), false
			}
			b := append(f.pending, data...)
			end := completeRunes(b)
			f.pending = append([]byte(nil), b[end:]...)
			if end > 0 {
				if err := emit(b[:end]); err != nil {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) || n == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// completeRunes is the length of b's longest prefix that does not end
// within a character: an incomplete sequence is looked for in the last
// UTFMax bytes only.
func completeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// Flush passes emit the bytes held back, if any: the file ended in the
// middle of a character and will not grow any more.
func (f *Follower) Flush(emit func([]byte) error) error {
	if len(f.pending) == 0 {
		return nil
	}
	b := f.pending
	f.pending = nil
	return emit(b)
}

// Close closes the file, if it was opened.
func (f *Follower) Close() error {
	if f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f = nil
	return err
}
