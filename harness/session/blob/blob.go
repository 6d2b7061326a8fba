// Package blob keeps named blobs in a session store (session.Store), so that data a workflow
// must not carry in its history (a big result, a request, a page of a batch) lives where the
// sessions do and follows their retention. Each blob is a session of its own, named by the
// blob, whose events are the blob's chunks; its header names no working directory anyone
// works in. Callers see names and bytes, never sessions.
package blob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/subflow-dev/subflow/harness/session"
)

// cwd is the cwd of a blob's session header: a blob is data, not an agent session, but every
// header needs an absolute cwd.
const cwd = "/"

// Store keeps named blobs in a session store. Its methods are safe for concurrent use as far
// as the session store's are.
type Store struct {
	sessions session.Store
	own      func(ctx context.Context, name string) error
}

// New returns the blob store over sessions. own, when not nil, is called with a blob's name
// before the blob is first written (after Put removed a former blob of that name, which
// forgets its owners: see session.Retainer); its error ends the write and is returned
// unchanged.
func New(sessions session.Store, own func(ctx context.Context, name string) error) *Store {
	if own == nil {
		own = func(context.Context, string) error { return nil }
	}
	return &Store{sessions: sessions, own: own}
}

// RangeError is the error of a Get of chunks [From, From+Count) of blob Name, which holds
// Chunks chunks.
type RangeError struct {
	Name                string
	From, Count, Chunks int
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("blob: %s: chunks %d+%d out of %d", e.Name, e.From, e.Count, e.Chunks)
}

// ChunkError is the error of a Get of blob Name that met a stored event, at Seq, that is no
// chunk of the kind asked for.
type ChunkError struct {
	Name string
	Seq  int64
}

func (e *ChunkError) Error() string {
	return fmt.Sprintf("blob: %s: event %d is no chunk", e.Name, e.Seq)
}

// ErrEmpty is the error of a GetValue of a blob that exists but holds no value yet.
var ErrEmpty = errors.New("blob: the blob holds no value")

// Put stores data as blob name in chunks of at most size bytes, each an event of type kind,
// replacing whatever blob of that name a failed earlier write may have left, syncs it and
// returns the number of chunks. Empty data is stored as a blob of no chunks. Errors of the
// session store are returned unchanged.
func (s *Store) Put(ctx context.Context, name, kind string, data []byte, size int) (chunks int, err error) {
	if err := s.sessions.Remove(ctx, name); err != nil {
		return 0, err
	}
	if err := s.own(ctx, name); err != nil {
		return 0, err
	}
	if err := s.sessions.Create(ctx, session.Header{ID: name, Cwd: cwd}); err != nil {
		return 0, err
	}
	var events []session.Event
	now := time.Now().UTC()
	for off := 0; off < len(data); off += size {
		e, err := session.NewEvent(kind, data[off:min(off+size, len(data))])
		if err != nil {
			return 0, err
		}
		e.Seq, e.Time = int64(len(events)), now
		events = append(events, e)
	}
	if err := s.sessions.Append(ctx, name, events...); err != nil {
		return 0, err
	}
	if err := s.sessions.Sync(ctx, name); err != nil {
		return 0, err
	}
	return len(events), nil
}

// Get returns chunks [from, from+count) of blob name, of type kind, concatenated. A blob the
// store does not hold fails with the session store's error (session.ErrNotFound); a range
// outside the blob with a *RangeError; a stored event of another kind with a *ChunkError.
func (s *Store) Get(ctx context.Context, name, kind string, from, count int) ([]byte, error) {
	_, events, err := s.sessions.Load(ctx, name)
	switch {
	case err != nil:
		return nil, err
	case from < 0 || count < 0 || from+count > len(events):
		return nil, &RangeError{Name: name, From: from, Count: count, Chunks: len(events)}
	}
	var data []byte
	for _, e := range events[from : from+count] {
		var chunk []byte
		if e.Type != kind || json.Unmarshal(e.Data, &chunk) != nil {
			return nil, &ChunkError{Name: name, Seq: e.Seq}
		}
		data = append(data, chunk...)
	}
	return data, nil
}

// PutValue stores the JSON encoding of v as blob name, one event of type kind, and syncs it.
// A blob of that name that holds a value already keeps it: a retried write, or two at once,
// leave the first copy. Errors of the session store are returned unchanged.
func (s *Store) PutValue(ctx context.Context, name, kind string, v any) error {
	if err := s.own(ctx, name); err != nil {
		return err
	}
	if err := s.sessions.Create(ctx, session.Header{ID: name, Cwd: cwd}); err != nil {
		return err
	}
	_, events, err := s.sessions.Load(ctx, name)
	if err != nil {
		return err
	}
	if len(events) > 0 {
		return nil
	}
	ev, err := session.NewEvent(kind, v)
	if err != nil {
		return err
	}
	if err := s.sessions.Append(ctx, name, ev); err != nil && !errors.Is(err, session.ErrSeqConflict) {
		return err
	}
	return s.sessions.Sync(ctx, name)
}

// GetValue decodes the value of blob name into v. A blob the store does not hold fails with
// the session store's error (session.ErrNotFound), one that holds no value with ErrEmpty, a
// value that does not decode into v with a *DecodeError.
func (s *Store) GetValue(ctx context.Context, name string, v any) error {
	_, events, err := s.sessions.Load(ctx, name)
	switch {
	case err != nil:
		return err
	case len(events) == 0:
		return ErrEmpty
	}
	if err := events[0].Decode(v); err != nil {
		return &DecodeError{Err: err}
	}
	return nil
}

// DecodeError is the error of a GetValue whose stored value does not decode; its message is
// the decoder's.
type DecodeError struct {
	Err error
}

func (e *DecodeError) Error() string { return e.Err.Error() }

func (e *DecodeError) Unwrap() error { return e.Err }

// Delete removes blob name; a blob the store does not hold is no error. Errors of the session
// store are returned unchanged.
func (s *Store) Delete(ctx context.Context, name string) error {
	return s.sessions.Remove(ctx, name)
}
