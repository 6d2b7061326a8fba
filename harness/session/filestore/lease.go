package filestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/subflow-dev/subflow/harness/session"
)

// leaseFile holds the session's lease state (leaseState as JSON), separate from the events
// file. Every lease operation holds its flock exclusively for a read-modify-write of a few
// bytes; fenced appends hold it shared while they check the token and write, so a takeover
// waits for a fenced append in progress and later appends of the stale holder see the new
// token.
const leaseFile = "lease"

// leaseState is the lease file's content. Expires is in Unix nanoseconds; zero means released.
type leaseState struct {
	Token   int64 `json:"token"`
	Expires int64 `json:"expires"`
}

// TryLease grants the lease when the lease file says it is free (see session.Leaser).
func (s *Store) TryLease(_ context.Context, id string, ttl time.Duration) (int64, error) {
	var token int64
	err := s.withLeaseFile("lease", id, unix.LOCK_EX, true, func(f *os.File, st leaseState) error {
		now := time.Now()
		if st.Expires > now.UnixNano() {
			return session.ErrLeased
		}
		token = st.Token + 1
		return writeLeaseState(f, leaseState{Token: token, Expires: now.Add(ttl).UnixNano()})
	})
	return token, err
}

// RenewLease extends the lease of token (see session.Leaser).
func (s *Store) RenewLease(_ context.Context, id string, token int64, ttl time.Duration) error {
	return s.withLeaseFile("renew lease", id, unix.LOCK_EX, false, func(f *os.File, st leaseState) error {
		if st.Token != token {
			return &session.FencedError{Token: token}
		}
		return writeLeaseState(f, leaseState{Token: token, Expires: time.Now().Add(ttl).UnixNano()})
	})
}

// ReleaseLease ends the lease of token (see session.Leaser).
func (s *Store) ReleaseLease(_ context.Context, id string, token int64) error {
	err := s.withLeaseFile("release lease", id, unix.LOCK_EX, false, func(f *os.File, st leaseState) error {
		if st.Token != token {
			return nil
		}
		return writeLeaseState(f, leaseState{Token: token})
	})
	if errors.Is(err, session.ErrNotFound) { // removed: no lease left to end
		return nil
	}
	return err
}

// AppendFenced appends if token is the session's lease token (see session.Leaser).
func (s *Store) AppendFenced(ctx context.Context, id string, token int64, events ...session.Event) error {
	var appendErr error // Append names the operation and the session itself
	err := s.withLeaseFile("append", id, unix.LOCK_SH, false, func(_ *os.File, st leaseState) error {
		if st.Token != token {
			return &session.FencedError{Token: token}
		}
		appendErr = s.Append(ctx, id, events...)
		return nil
	})
	if err != nil {
		return err
	}
	return appendErr
}

// withLeaseFile calls fn with the session's lease file, locked as how says, and its state.
// Without create, a missing lease file is a stale token (no lease was ever granted), unless
// the session itself is missing.
func (s *Store) withLeaseFile(op, id string, how int, create bool, fn func(*os.File, leaseState) error) error {
	if err := s.check(id); err != nil {
		return opErr(op, id, err)
	}
	dir := s.dir(id)
	if _, err := os.Stat(filepath.Join(dir, headerFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = session.ErrNotFound
		}
		return opErr(op, id, err)
	}
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(filepath.Join(dir, leaseFile), flags, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(filepath.Join(dir, headerFile)); serr != nil {
			return opErr(op, id, session.ErrNotFound) // removed since the Stat
		}
		return opErr(op, id, fn(nil, leaseState{}))
	}
	if err != nil {
		return opErr(op, id, err)
	}
	defer f.Close() // releases the lock
	if err := flock(f, how); err != nil {
		return opErr(op, id, err)
	}
	var st unix.Stat_t
	if err := fstat(f, &st); err != nil {
		return opErr(op, id, err)
	}
	if st.Nlink == 0 { // the session was removed
		return opErr(op, id, session.ErrNotFound)
	}
	state, err := readLeaseState(f)
	if err != nil {
		return opErr(op, id, err)
	}
	return opErr(op, id, fn(f, state))
}

func readLeaseState(f *os.File) (leaseState, error) {
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<16))
	if err != nil {
		return leaseState{}, fmt.Errorf("read %s: %w", leaseFile, err)
	}
	var st leaseState
	if len(data) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return leaseState{}, fmt.Errorf("%w: %s: %v", session.ErrCorrupt, leaseFile, err)
	}
	return st, nil
}

// writeLeaseState rewrites the lease file in place; the truncate drops any longer earlier
// content. Only holders of the exclusive flock write, and readers hold it shared.
func writeLeaseState(f *os.File, st leaseState) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return fmt.Errorf("write %s: %w", leaseFile, err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		return fmt.Errorf("write %s: %w", leaseFile, err)
	}
	return nil
}
