package follow

import (
	"bytes"
	"testing"
)

// skipWriter drops exactly the first n bytes, across any write sizes.
func TestSkipWriter(t *testing.T) {
	const text = "==> #1 implementation (iteration 1) <==\nhéllo\n"
	for n := range len(text) + 2 {
		for _, size := range []int{1, 3, 7, len(text)} {
			var out bytes.Buffer
			w := &skipWriter{w: &out, n: int64(n)}
			for i := 0; i < len(text); i += size {
				chunk := text[i:min(i+size, len(text))]
				if m, err := w.Write([]byte(chunk)); err != nil || m != len(chunk) {
					t.Fatalf("Write = %d, %v", m, err)
				}
			}
			if want := text[min(n, len(text)):]; out.String() != want {
				t.Fatalf("skip %d in writes of %d: %q, want %q", n, size, out.String(), want)
			}
		}
	}
}
