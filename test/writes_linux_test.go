package e2e

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// writeCounter counts the completed writes of every file in one directory with inotify: the
// kernel's count of tool executions that wrote a file, whichever process made them. A write
// is a file closed after writing (IN_CLOSE_WRITE) or a file renamed to the name
// (IN_MOVED_TO): write_file writes a temporary file and renames it over the path, and the
// temporary name, moved away (IN_MOVED_FROM), is forgotten.
type writeCounter struct {
	dir string
	f   *os.File

	mu       sync.Mutex
	counts   map[string]int
	overflow bool
	changed  chan struct{} // closed and replaced on every event
	done     chan struct{}
}

// sentinel is the file countWrites' callers write to flush the counter (see settle).
const sentinel = ".settled"

// countWrites starts counting the writes of files in dir until the test ends.
func countWrites(t testing.TB, dir string) *writeCounter {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	require.NoError(t, err)
	_, err = unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_WRITE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO)
	require.NoError(t, err)
	// A non-blocking fd goes through the runtime poller, so Close ends a pending Read.
	w := &writeCounter{dir: dir, f: os.NewFile(uintptr(fd), "inotify"), counts: map[string]int{},
		changed: make(chan struct{}), done: make(chan struct{})}
	go w.read()
	t.Cleanup(func() {
		_ = w.f.Close()
		<-w.done
	})
	return w
}

func (w *writeCounter) read() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				w.overflow = true
			}
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			switch {
			case len(name) == 0:
			case ev.Mask&unix.IN_MOVED_FROM != 0:
				delete(w.counts, string(name))
			default:
				w.counts[string(name)]++
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
	}
}

// snapshot returns the counts so far and the number of files written at least once.
func (w *writeCounter) snapshot() (map[string]int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.counts))
	files := 0
	for name, n := range w.counts {
		if name == sentinel {
			continue
		}
		out[name] = n
		files++
	}
	return out, files
}

// waitFiles waits until at least n files were written.
func (w *writeCounter) waitFiles(t testing.TB, n int) {
	t.Helper()
	deadline := time.After(2 * waitLimit)
	for {
		w.mu.Lock()
		changed := w.changed
		w.mu.Unlock()
		if _, files := w.snapshot(); files >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("fewer than %d files were written in %s", n, w.dir)
		}
	}
}

// settle writes the sentinel file and waits until the counter saw it, so every write made
// before the call is counted; it returns the counts.
func (w *writeCounter) settle(t testing.TB) map[string]int {
	t.Helper()
	w.mu.Lock()
	before := w.counts[sentinel]
	w.mu.Unlock()
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, sentinel), nil, 0o644))
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.counts[sentinel] > before
	}, waitLimit, 5*time.Millisecond)
	w.mu.Lock()
	overflow := w.overflow
	w.mu.Unlock()
	require.False(t, overflow, "inotify queue overflowed: %v", errors.New("counts are incomplete"))
	counts, _ := w.snapshot()
	return counts
}
