package sdkproc

import (
	"bufio"
	"io"
	"strings"
	"sync"
)

// Bounds of the child's stderr kept for diagnostics (contract R-52).
const (
	stderrTailLines   = 400
	stderrMaxLineSize = 4 << 10
)

// stderrTail keeps the last stderrTailLines lines written to a child's stderr, each cut to
// stderrMaxLineSize bytes, so a chatty or hostile child costs at most ~1.6 MB.
type stderrTail struct {
	mu    sync.Mutex
	lines []string // ring; next is the slot of the oldest line once full
	next  int
}

// consume reads r to its end, keeping the tail. onLine, if set, sees every kept line.
func (t *stderrTail) consume(r io.Reader, onLine func(string)) {
	br := bufio.NewReaderSize(r, stderrMaxLineSize)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			s := trimLine(line) // copies: line is only valid until the next read
			// Keep the head of an overlong line; skip the rest of it.
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			t.add(s)
			if onLine != nil {
				onLine(s)
			}
		}
		if err != nil {
			return
		}
	}
}

func trimLine(b []byte) string {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	// A cut may split a rune; drop invalid bytes rather than keep them in messages.
	return strings.ToValidUTF8(string(b), "")
}

func (t *stderrTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) < stderrTailLines {
		t.lines = append(t.lines, line)
		return
	}
	t.lines[t.next] = line
	t.next = (t.next + 1) % stderrTailLines
}

// Lines returns the kept lines, oldest first.
func (t *stderrTail) Lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.lines))
	out = append(out, t.lines[t.next:]...)
	return append(out, t.lines[:t.next]...)
}
