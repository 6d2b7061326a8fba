package filestore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/subflow-dev/subflow/harness/session"
)

// ownersFile lists the session's owners, one JSON ownerRecord a line, appended under its
// exclusive flock. It may exist before the header (Own precedes Create), and it goes with
// the session's directory.
const ownersFile = "owners"

// ownerRecord is one line of the owners file: the owner and when it was recorded. The time
// is written rather than read from the file's mtime, so a listing compares times of one
// clock whichever host recorded them.
type ownerRecord struct {
	Owner string    `json:"owner"`
	At    time.Time `json:"at"`
}

var _ session.Retainer = (*Store)(nil)

// Own records owner as an owner of session id (see session.Retainer).
func (s *Store) Own(_ context.Context, id, owner string) error {
	if err := s.check(id); err != nil {
		return opErr("own", id, err)
	}
	line, err := json.Marshal(ownerRecord{Owner: owner, At: time.Now().UTC()})
	if err != nil {
		return opErr("own", id, err)
	}
	line = append(line, '\n')
	// A RemoveOwned that won the lock unlinked the file: record the owner in a new one.
	for {
		if err := os.MkdirAll(s.dir(id), 0o755); err != nil {
			return opErr("own", id, err)
		}
		f, err := os.OpenFile(filepath.Join(s.dir(id), ownersFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the directory went away since MkdirAll
		}
		if err != nil {
			return opErr("own", id, err)
		}
		removed, err := appendLocked(f, line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return opErr("own", id, err)
		}
		if !removed {
			return nil
		}
	}
}

// appendLocked writes line to f under its exclusive flock, unless the file was unlinked
// before the lock was had: then it reports removed.
func appendLocked(f *os.File, line []byte) (removed bool, err error) {
	if err := flock(f, unix.LOCK_EX); err != nil {
		return false, err
	}
	var st unix.Stat_t
	if err := fstat(f, &st); err != nil {
		return false, err
	}
	if st.Nlink == 0 {
		return true, nil
	}
	_, err = f.Write(line)
	return false, err
}

// Owned lists the sessions with owners that q selects (see session.Retainer), reading every
// session directory after q.After until it has q.Limit of them.
func (s *Store) Owned(_ context.Context, q session.OwnedQuery) ([]session.Owned, error) {
	if err := session.ValidateOwnedQuery(q); err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("session: list owned sessions: %w", session.ErrClosed)
	}
	entries, err := os.ReadDir(s.root) // sorted by name, byte-wise
	if err != nil {
		return nil, fmt.Errorf("session: list owned sessions: %w", err)
	}
	var out []session.Owned
	for _, e := range entries {
		if len(out) == q.Limit {
			break
		}
		if !e.IsDir() || e.Name() <= q.After || session.ValidateID(e.Name()) != nil {
			continue
		}
		o, ok, err := s.owned(e.Name())
		if err != nil {
			return nil, fmt.Errorf("session: list owned sessions: %w", err)
		}
		if ok && o.Touched.Before(q.Before) {
			out = append(out, o)
		}
	}
	return out, nil
}

// owned reads the owners and the size of session id; ok is false when it has no owners (or
// was removed meanwhile).
func (s *Store) owned(id string) (o session.Owned, ok bool, err error) {
	dir := s.dir(id)
	data, err := os.ReadFile(filepath.Join(dir, ownersFile))
	if errors.Is(err, fs.ErrNotExist) {
		return o, false, nil
	}
	if err != nil {
		return o, false, err
	}
	o.ID = id
	o.Owners, o.Touched = decodeOwners(data)
	if len(o.Owners) == 0 {
		return o, false, nil
	}
	files, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return o, false, nil
	}
	if err != nil {
		return o, false, err
	}
	for _, f := range files {
		if info, err := f.Info(); err == nil && info.Mode().IsRegular() {
			o.Size += info.Size()
		}
	}
	return o, true, nil
}

// decodeOwners returns the distinct owners of an owners file, sorted, and the latest time
// one was recorded. A torn last line left by a crash is skipped, like any line that does not
// decode: the owner it would have named is recorded again by its run's next use.
func decodeOwners(data []byte) (owners []string, touched time.Time) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		var r ownerRecord
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Owner == "" {
			continue
		}
		if !slices.Contains(owners, r.Owner) {
			owners = append(owners, r.Owner)
		}
		if r.At.After(touched) {
			touched = r.At
		}
	}
	slices.Sort(owners)
	return owners, touched
}

// RemoveOwned removes the session unless an owner was recorded after touched (see
// session.Retainer). It holds the owners file's lock while it checks and removes, so an Own
// racing it either lands first, and the session is kept, or finds the file gone and records
// its owner anew.
func (s *Store) RemoveOwned(ctx context.Context, id string, touched time.Time) (bool, error) {
	if err := s.check(id); err != nil {
		return false, opErr("remove owned", id, err)
	}
	f, err := os.OpenFile(filepath.Join(s.dir(id), ownersFile), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, opErr("remove owned", id, err)
	}
	defer f.Close() // releases the lock
	if err := flock(f, unix.LOCK_EX); err != nil {
		return false, opErr("remove owned", id, err)
	}
	var st unix.Stat_t
	if err := fstat(f, &st); err != nil {
		return false, opErr("remove owned", id, err)
	}
	if st.Nlink == 0 {
		return false, nil // removed meanwhile
	}
	data, err := os.ReadFile(filepath.Join(s.dir(id), ownersFile))
	if err != nil {
		return false, opErr("remove owned", id, err)
	}
	owners, latest := decodeOwners(data)
	if len(owners) == 0 || latest.After(touched) {
		return false, nil
	}
	if err := s.Remove(ctx, id); err != nil {
		return false, err
	}
	return true, nil
}
