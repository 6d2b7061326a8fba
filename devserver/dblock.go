package devserver

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrDBInUse is the error of a Start on a database file another server holds.
var ErrDBInUse = errors.New("the database is in use by another dev server")

// lockDB takes the lock of the database file path, held until the returned file is closed:
// an exclusive flock on path+".lock". SQLite's own locks guard single transactions only, so
// without it a second server starts on the same file and the first then fails to take its
// shards' ranges. A lock held elsewhere fails at once with ErrDBInUse, naming the file.
func lockDB(path string) (*os.File, error) {
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devserver: database %s: lock: %w", path, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		f.Close()
		return nil, fmt.Errorf("devserver: database %s: %w (its lock %s is held): stop that server, or pass another --db", path, ErrDBInUse, name)
	default:
		f.Close()
		return nil, fmt.Errorf("devserver: database %s: lock %s: %w", path, name, err)
	}
}
