//go:build !linux

package e2e

import "testing"

// writeCounter counts file writes with inotify, which only Linux has: elsewhere the tests
// that count tool writes skip (see writes_linux_test.go).
type writeCounter struct{}

// sentinel is the file countWrites' callers write to flush the counter (see settle).
const sentinel = ".settled"

func countWrites(t testing.TB, dir string) *writeCounter {
	t.Skip("counting tool writes needs inotify (Linux)")
	return nil
}

func (w *writeCounter) snapshot() (map[string]int, int)    { return nil, 0 }
func (w *writeCounter) waitFiles(t testing.TB, n int)      {}
func (w *writeCounter) settle(t testing.TB) map[string]int { return nil }
