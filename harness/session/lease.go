package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLeased: another holder kept the session's lease until the caller's context ended.
var ErrLeased = errors.New("session is leased by another holder")

// Leaser is implemented by stores that grant exclusive leases on sessions. A drive holds the
// lease of its session while it appends, so a second drive of the same session, in this or
// another process or host sharing the store, waits or fails clearly instead of racing it for
// seqs (which Append would reject, but only after both did the work).
type Leaser interface {
	// Lease blocks until the caller holds the session's lease. The session must exist, else
	// the error wraps ErrNotFound. If the lease stays held by another until ctx ends, the
	// error names the session and wraps both ErrLeased and ctx.Err(). Lease tries once even
	// if ctx has already ended, so a done ctx asks for the lease without waiting.
	//
	// Leases are exclusive per session across every store instance on the same backing data,
	// including two Lease calls on one instance. A lease ends when release is called (later
	// calls return nil) or when its holder dies: the operating system or the database frees
	// it when the holding process exits, however it exits. A lease is independent of the
	// store's other state: closing the store does not end it.
	Lease(ctx context.Context, id string) (release func() error, err error)
}

// leaseFile is the lease's lock file, separate from the events file so a lease holder's own
// appends (which lock the events file) do not contend with it.
const leaseFile = "lease"

// Lease takes an exclusive flock of <root>/<id>/lease (see Leaser), polling with backoff while
// another open file description holds it, since a blocking flock cannot be cancelled. The
// kernel drops the lock when the holding process exits. Removing the session deletes the lease
// file and so ends its lease.
func (s *FileStore) Lease(ctx context.Context, id string) (release func() error, err error) {
	if err := s.check(id); err != nil {
		return nil, opErr("lease", id, err)
	}
	dir := s.dir(id)
	if _, err := os.Stat(filepath.Join(dir, headerFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = ErrNotFound
		}
		return nil, opErr("lease", id, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, leaseFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) { // removed since the Stat
			err = ErrNotFound
		}
		return nil, opErr("lease", id, err)
	}
	if err := waitFlock(ctx, f); err != nil {
		f.Close()
		return nil, opErr("lease", id, err)
	}
	var st unix.Stat_t
	if err := fstat(f, &st); err != nil {
		f.Close()
		return nil, opErr("lease", id, err)
	}
	if st.Nlink == 0 { // removed while we waited
		f.Close()
		return nil, opErr("lease", id, ErrNotFound)
	}
	return sync.OnceValue(func() error {
		if err := f.Close(); err != nil { // closing drops the lock
			return opErr("release lease", id, err)
		}
		return nil
	}), nil
}

// Lease polling backoff: short at first, so a handover between drives is quick, and capped so
// a long wait costs little.
const (
	leaseFirstWait = 5 * time.Millisecond
	leaseMaxWait   = 250 * time.Millisecond
)

// waitFlock takes f's exclusive lock without blocking, retrying with backoff until ctx ends.
func waitFlock(ctx context.Context, f *os.File) error {
	wait := leaseFirstWait
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case err == unix.EINTR:
			continue
		case err != unix.EWOULDBLOCK:
			return fmt.Errorf("flock %s: %w", f.Name(), err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w: %w", ErrLeased, ctx.Err())
		case <-timer.C:
		}
		wait = min(2*wait, leaseMaxWait)
	}
}
