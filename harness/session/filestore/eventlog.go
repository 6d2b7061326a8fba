package filestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/subflow-dev/subflow/harness/session"
)

// maxKeptBuffer bounds the encode buffer an open session keeps between appends, so one huge
// event does not pin its size for the session's lifetime.
const maxKeptBuffer = 1 << 20

// eventLog is a Store's writer state for one session, guarded by mu.
type eventLog struct {
	mu   sync.Mutex
	dir  string
	dead bool          // removed from the store's map: look the session up again
	f    *os.File      // the events file, opened O_APPEND; nil until first use
	used atomic.Uint64 // the store's clock at the last use, for trimming

	// What the file held when this store last had its lock: size is the end of the last
	// complete line, next the seq the next event must carry.
	size int64
	next int64

	buf bytes.Buffer
	enc *json.Encoder
}

// open opens the events file of an existing session.
func (l *eventLog) open() error {
	if _, err := os.Stat(filepath.Join(l.dir, headerFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return session.ErrNotFound
		}
		return err
	}
	f, err := os.OpenFile(filepath.Join(l.dir, eventsFile), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) { // the directory went away since the Stat
			return session.ErrNotFound
		}
		return err
	}
	l.f, l.size, l.next = f, 0, 0
	return nil
}

// close closes the events file, releasing its lock; the next use opens and re-reads it.
func (l *eventLog) close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// append writes events as one write call under the file's exclusive lock, after checking
// that their seqs continue the log as the file holds it now.
func (l *eventLog) append(events []session.Event) error {
	if err := l.lock(); err != nil {
		return err
	}
	for i, e := range events {
		if want := l.next + int64(i); e.Seq != want {
			l.unlock()
			return fmt.Errorf("%w: event %d (%s) has seq %d, want %d", session.ErrSeqConflict, i, e.Type, e.Seq, want)
		}
	}
	if l.enc == nil || l.buf.Cap() > maxKeptBuffer {
		l.buf = bytes.Buffer{}
		l.enc = json.NewEncoder(&l.buf)
		l.enc.SetEscapeHTML(false)
	}
	l.buf.Reset()
	for _, e := range events {
		if err := l.enc.Encode(e); err != nil { // Encode writes one compact line
			l.unlock()
			return fmt.Errorf("encode %s event seq %d: %w", e.Type, e.Seq, err)
		}
	}
	n, err := l.f.Write(l.buf.Bytes())
	if err != nil {
		// Cut what reached the file, then start over from the file on the next use (the
		// torn-tail recovery in lock covers a failed cut too).
		if n > 0 {
			_ = l.f.Truncate(l.size)
		}
		l.close()
		return fmt.Errorf("write %s: %w", eventsFile, err)
	}
	l.size += int64(n)
	l.next += int64(len(events))
	l.unlock()
	return nil
}

// lock opens the file if needed, takes its exclusive lock and brings size and next up to date
// with what other writers appended meanwhile. It cuts a torn tail left by a crashed writer:
// under the lock no live writer can be mid-append.
func (l *eventLog) lock() error {
	var st unix.Stat_t
	for attempt := 0; ; attempt++ {
		if l.f == nil {
			if err := l.open(); err != nil {
				return err
			}
		}
		if err := flock(l.f, unix.LOCK_EX); err != nil {
			return err
		}
		if err := fstat(l.f, &st); err != nil {
			l.unlock()
			return err
		}
		if st.Nlink > 0 {
			break
		}
		// Another store removed the session (and may have created it again) since we opened
		// the file.
		l.close()
		if attempt > 0 {
			return session.ErrNotFound
		}
	}
	if st.Size == l.size {
		return nil
	}
	if err := l.catchUp(st.Size); err != nil {
		l.unlock()
		return err
	}
	return nil
}

// catchUp reads the lines appended since size and next were last true; if the file shrank it
// was replaced behind our back, so it reads it all.
func (l *eventLog) catchUp(size int64) error {
	from, next := l.size, l.next
	if size < from {
		from, next = 0, 0
	}
	data := make([]byte, size-from)
	if _, err := l.f.ReadAt(data, from); err != nil {
		return fmt.Errorf("read %s: %w", eventsFile, err)
	}
	n, err := eachLine(data, func(line []byte) error {
		var rec struct {
			Seq *int64 `json:"seq"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("%w: line for seq %d: %v", session.ErrCorrupt, next, err)
		}
		if rec.Seq == nil || *rec.Seq != next {
			return fmt.Errorf("%w: line for seq %d has another seq or none", session.ErrCorrupt, next)
		}
		next++
		return nil
	})
	if err != nil {
		return err
	}
	if n < len(data) {
		if err := l.f.Truncate(from + int64(n)); err != nil {
			return fmt.Errorf("cut torn tail of %s: %w", eventsFile, err)
		}
	}
	l.size, l.next = from+int64(n), next
	return nil
}

// unlock releases the exclusive lock; closing the file releases it as well.
func (l *eventLog) unlock() {
	if l.f != nil {
		_ = flock(l.f, unix.LOCK_UN)
	}
}

// readShared reads a whole events file under a shared lock, so no append is half in it. A
// missing file is an empty log.
func readShared(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close() // releases the lock
	if err := flock(f, unix.LOCK_SH); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if info, err := f.Stat(); err == nil {
		buf.Grow(int(info.Size()) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeEvents decodes the complete lines of an events file; bytes after the last newline are
// a torn record and ignored.
func decodeEvents(data []byte) ([]session.Event, error) {
	events := make([]session.Event, 0, bytes.Count(data, []byte{'\n'}))
	_, err := eachLine(data, func(line []byte) error {
		want := int64(len(events))
		var e session.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("%w: line for seq %d: %v", session.ErrCorrupt, want, err)
		}
		if e.Seq != want {
			return fmt.Errorf("%w: line has seq %d, want %d", session.ErrCorrupt, e.Seq, want)
		}
		events = append(events, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, nil
	}
	return events, nil
}

// eachLine calls fn with every newline-terminated line of data, without the newline, and
// returns the length of that complete prefix.
func eachLine(data []byte, fn func(line []byte) error) (int, error) {
	n := 0
	for {
		i := bytes.IndexByte(data[n:], '\n')
		if i < 0 {
			return n, nil
		}
		if err := fn(data[n : n+i]); err != nil {
			return n, err
		}
		n += i + 1
	}
}

// flock applies an advisory lock, retrying when a signal (the Go runtime's preemption
// signal, say) interrupts the wait.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			if err != nil {
				return fmt.Errorf("flock %s: %w", f.Name(), err)
			}
			return nil
		}
	}
}

func fstat(f *os.File, st *unix.Stat_t) error {
	if err := unix.Fstat(int(f.Fd()), st); err != nil {
		return fmt.Errorf("fstat %s: %w", f.Name(), err)
	}
	return nil
}
