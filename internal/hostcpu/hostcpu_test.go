package hostcpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Read sums the cpu line's first eight fields, counting user, nice, system, irq and softirq
// as busy, and names the file in its errors.
func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stat")
	require.NoError(t, os.WriteFile(path, []byte("cpu  10 1 5 100 20 2 3 4 7 9\ncpu0 1 2 3 4 5 6 7 8 0 0\n"), 0o600))
	got, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, Times{Busy: 21, Total: 145}, got, "guest times are in user already; idle, iowait and steal are not busy")
	assert.InDelta(t, 0.5, Times{Busy: 71, Total: 245}.BusyShareSince(got), 1e-9)
	assert.Zero(t, got.BusyShareSince(got), "no time passed")

	for _, bad := range []string{"intr 1 2 3\n", "cpu  1 x 3 4 5 6 7 8\n", "cpu 1 2 3 4\n", ""} {
		require.NoError(t, os.WriteFile(path, []byte(bad), 0o600))
		_, err := Read(path)
		assert.ErrorContains(t, err, path, "%q", bad)
	}
	_, err = Read(filepath.Join(t.TempDir(), "absent"))
	assert.ErrorContains(t, err, "absent")
}

// On Linux the machine's own /proc/stat reads.
func TestReadPath(t *testing.T) {
	if _, err := os.Stat(Path); err != nil {
		t.Skipf("no %s: %v", Path, err)
	}
	got, err := Read(Path)
	require.NoError(t, err)
	assert.Greater(t, got.Total, got.Busy)
}
