package filestore

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

	"github.com/subflow-dev/subflow/harness/session"
)

// leaseFile is the lease's lock file, separate from the events file so a lease holder's own
// appends (which lock the events file) do not contend with it.
const leaseFile = "lease"

// Lease takes an exclusive flock of <root>/<id>/lease (see session.Leaser), polling with backoff while
// another open file description holds it, since a blocking flock cannot be cancelled. The
// kernel drops the lock when the holding process exits. Removing the session deletes the lease
// file and so ends its lease.
func (s *Store) Lease(ctx context.Context, id string) (release func() error, err error) {
	if err := s.check(id); err != nil {
		return nil, opErr("lease", id, err)
	}
	dir := s.dir(id)
	if _, err := os.Stat(filepath.Join(dir, headerFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = session.ErrNotFound
		}
		return nil, opErr("lease", id, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, leaseFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) { // removed since the Stat
			err = session.ErrNotFound
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
		return nil, opErr("lease", id, session.ErrNotFound)
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
			return fmt.Errorf("%w: %w", session.ErrLeased, ctx.Err())
		case <-timer.C:
		}
		wait = min(2*wait, leaseMaxWait)
	}
}
