package filestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/subflow-dev/subflow/harness/session"
)

const (
	headerFile = "header.json"
	eventsFile = "events.jsonl"
)

// Store is the default session.Store. Each session is a directory under the root:
//
//	<root>/<id>/header.json   the header, written once, atomically
//	<root>/<id>/events.jsonl  the log, one compact JSON event per line
//
// Every Append is one write call, made under an advisory flock of the events file; before
// checking seqs it reads whatever another Store (in this or another process) appended
// meanwhile, so two writers can never interleave undetected: the loser gets session.ErrSeqConflict.
// Load reads under a shared flock and so never sees half an append. A torn last line left by
// a crash is ignored by Load and cut off before the next Append.
//
// Operations complete even when their context is done: they are short local file I/O, and an
// agent settling an aborted turn must still be able to record it.
//
// session.Subscribers see the events appended through this Store, not those of other writers.
// The store keeps the events files of the sessions it appended to or synced recently open; past
// MaxOpenLogs it closes the least recently used ones, so a long-lived worker that has touched
// thousands of sessions holds a bounded number of files and buffers.
type Store struct {
	root string

	mu     sync.Mutex
	logs   map[string]*eventLog
	clock  uint64 // advanced on every use of a log, to find the least recently used
	closed bool

	subs session.Subscribers
}

var (
	_ session.Store  = (*Store)(nil)
	_ session.Leaser = (*Store)(nil)
)

// New returns a store keeping its sessions under root, creating root if needed.
func New(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("session: new file store: root is empty")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("session: new file store %s: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("session: new file store: %w", err)
	}
	return &Store{
		root: abs,
		logs: make(map[string]*eventLog),
	}, nil
}

// MaxOpenLogs bounds the sessions whose events file a Store keeps open between operations.
const MaxOpenLogs = 256

// Root returns the absolute directory holding the sessions.
func (s *Store) Root() string { return s.root }

// Create creates the session if absent (see session.Store). Headers are compared by value, not by
// bytes; a nil session.Route equals a zero one.
func (s *Store) Create(_ context.Context, h session.Header) error {
	if err := s.check(h.ID); err != nil {
		return opErr("create", h.ID, err)
	}
	if err := h.Validate(); err != nil {
		return opErr("create", h.ID, err)
	}
	dir := s.dir(h.ID)
	existing, err := readHeader(dir)
	if err == nil {
		return opErr("create", h.ID, compareHeaders(existing, h))
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return opErr("create", h.ID, err)
	}
	if err := s.create(dir, h); err != nil {
		return opErr("create", h.ID, err)
	}
	return nil
}

// create writes a new session directory. The header appears atomically (linked from a
// complete, synced temporary file), and only after the events file exists, so a session with
// a header always has a log. Losing a race with another creator compares headers like Create.
func (s *Store) create(dir string, h session.Header) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, eventsFile), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".header-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), filepath.Join(dir, headerFile)); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		existing, rerr := readHeader(dir)
		if rerr != nil {
			return rerr
		}
		return compareHeaders(existing, h)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	return syncDir(s.root)
}

// Append adds events to the end of the log (see session.Store). Subscribers are called after the
// write, from this goroutine, in seq order.
func (s *Store) Append(_ context.Context, id string, events ...session.Event) error {
	if err := s.check(id); err != nil {
		return opErr("append", id, err)
	}
	if len(events) == 0 {
		return nil
	}
	l, err := s.lockLog(id)
	if err != nil {
		return opErr("append", id, err)
	}
	defer s.trim()
	defer l.mu.Unlock()
	if err := l.append(events); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			s.forget(id, l)
		}
		return opErr("append", id, err)
	}
	// Still under l.mu, so batches of concurrent appenders reach subscribers in seq order.
	s.subs.Publish(id, events)
	return nil
}

// Sync fsyncs the session's events file, including events other writers appended.
func (s *Store) Sync(_ context.Context, id string) error {
	if err := s.check(id); err != nil {
		return opErr("sync", id, err)
	}
	l, err := s.lockLog(id)
	if err != nil {
		return opErr("sync", id, err)
	}
	defer s.trim()
	defer l.mu.Unlock()
	if l.f == nil {
		if err := l.open(); err != nil {
			if errors.Is(err, session.ErrNotFound) {
				s.forget(id, l)
			}
			return opErr("sync", id, err)
		}
	}
	if err := l.f.Sync(); err != nil {
		return opErr("sync", id, err)
	}
	return nil
}

// Load returns the header and the whole log (see session.Store). It fails with session.ErrNotFound when the
// session has no header, and with session.ErrCorrupt when a complete line cannot be decoded or seqs
// are not dense from 0.
func (s *Store) Load(_ context.Context, id string) (session.Header, []session.Event, error) {
	if err := s.check(id); err != nil {
		return session.Header{}, nil, opErr("load", id, err)
	}
	dir := s.dir(id)
	h, err := readHeader(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = session.ErrNotFound
		}
		return session.Header{}, nil, opErr("load", id, err)
	}
	data, err := readShared(filepath.Join(dir, eventsFile))
	if err != nil {
		return session.Header{}, nil, opErr("load", id, err)
	}
	events, err := decodeEvents(data)
	if err != nil {
		return session.Header{}, nil, opErr("load", id, err)
	}
	return h, events, nil
}

// Subscribe calls fn with every event appended to the session through this store from now on
// (see session.Store). fn may call the returned unsubscribe itself and then gets no further event;
// once unsubscribe has returned, no Append that starts later calls fn.
func (s *Store) Subscribe(id string, fn func(session.Event)) (unsubscribe func()) {
	return s.subs.Subscribe(id, fn)
}

// Remove deletes the session's directory and closes this store's file of it (see session.Store). It
// holds the events file's lock while deleting, so no other store is mid-append.
func (s *Store) Remove(_ context.Context, id string) error {
	if err := s.check(id); err != nil {
		return opErr("remove", id, err)
	}
	s.mu.Lock()
	l := s.logs[id]
	delete(s.logs, id)
	s.mu.Unlock()
	if l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.dead = true
		if err := l.close(); err != nil {
			return opErr("remove", id, err)
		}
	}
	dir := s.dir(id)
	f, err := os.Open(filepath.Join(dir, eventsFile))
	switch {
	case err == nil:
		defer f.Close() // releases the lock
		if err := flock(f, unix.LOCK_EX); err != nil {
			return opErr("remove", id, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return opErr("remove", id, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return opErr("remove", id, err)
	}
	return nil
}

// Close releases every open file. Afterwards every operation fails with session.ErrClosed. Close is
// idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	logs := s.logs
	s.logs = nil
	s.mu.Unlock()
	var errs []error
	for id, l := range logs {
		l.mu.Lock()
		l.dead = true
		if err := l.close(); err != nil {
			errs = append(errs, opErr("close", id, err))
		}
		l.mu.Unlock()
	}
	return errors.Join(errs...)
}

// check validates id and that the store is open.
func (s *Store) check(id string) error {
	if err := session.ValidateID(id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return session.ErrClosed
	}
	return nil
}

func (s *Store) dir(id string) string { return filepath.Join(s.root, id) }

// lockLog returns the session's log state, locked. Remove and Close unlink a log from the map
// before marking it dead, so the retry finds a live one.
func (s *Store) lockLog(id string) (*eventLog, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, session.ErrClosed
		}
		l := s.logs[id]
		if l == nil {
			l = &eventLog{dir: s.dir(id)}
			s.logs[id] = l
		}
		s.clock++
		l.used.Store(s.clock)
		s.mu.Unlock()
		l.mu.Lock()
		if !l.dead {
			return l, nil
		}
		l.mu.Unlock()
	}
}

// trim closes the least recently used logs while more than MaxOpenLogs are kept, down to
// three quarters of it. A log busy in another goroutine is skipped (TryLock: never waiting
// on a log while deciding, so no lock order exists to get wrong); it is trimmed next time.
// A closed log is dropped from the map and reopened, re-reading its file, on its next use.
func (s *Store) trim() {
	s.mu.Lock()
	if len(s.logs) <= MaxOpenLogs {
		s.mu.Unlock()
		return
	}
	type entry struct {
		id string
		l  *eventLog
	}
	all := make([]entry, 0, len(s.logs))
	for id, l := range s.logs {
		all = append(all, entry{id, l})
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].l.used.Load() < all[j].l.used.Load() })
	for _, e := range all[:len(all)-MaxOpenLogs*3/4] {
		if !e.l.mu.TryLock() {
			continue
		}
		_ = e.l.close() // nothing is buffered: every Append wrote through
		s.forget(e.id, e.l)
		e.l.mu.Unlock()
	}
}

// forget drops the state of a session that does not exist; the caller holds l.mu.
func (s *Store) forget(id string, l *eventLog) {
	l.dead = true
	s.mu.Lock()
	if s.logs[id] == l {
		delete(s.logs, id)
	}
	s.mu.Unlock()
}

func opErr(op, id string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("session: %s %s: %w", op, id, err)
}

func readHeader(dir string) (session.Header, error) {
	data, err := os.ReadFile(filepath.Join(dir, headerFile))
	if err != nil {
		return session.Header{}, err
	}
	var h session.Header
	if err := json.Unmarshal(data, &h); err != nil {
		return session.Header{}, fmt.Errorf("%w: %s: %v", session.ErrCorrupt, headerFile, err)
	}
	return h, nil
}

// compareHeaders returns nil if have and want are the same header, else session.ErrHeaderMismatch.
func compareHeaders(have, want session.Header) error {
	if have.Equal(want) {
		return nil
	}
	return session.HeaderMismatchError(have, want)
}

func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
