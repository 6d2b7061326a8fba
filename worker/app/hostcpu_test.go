package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeStat writes a /proc/stat file whose cpu line has the given user and idle ticks.
func writeStat(t *testing.T, path string, user, idle int) {
	t.Helper()
	line := fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n", user, idle)
	// Written whole under another name and renamed, as the kernel's file reads: never half.
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(line), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// readCPUTimes sums the cpu line's first eight fields, iowait counted as idle, and names
// the file in its errors.
func TestReadCPUTimes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stat")
	require.NoError(t, os.WriteFile(path, []byte("cpu  10 1 5 100 20 2 3 4 7 9\n"), 0o600))
	got, err := readCPUTimes(path)
	require.NoError(t, err)
	assert.Equal(t, cpuTimes{idle: 120, total: 145}, got, "guest times are in user already")
	assert.InDelta(t, 0.5, cpuTimes{idle: 170, total: 245}.busyShareSince(got), 1e-9)
	assert.Zero(t, got.busyShareSince(got), "no time passed")

	for _, bad := range []string{"intr 1 2 3\n", "cpu  1 x 3 4 5\n", "cpu 1 2\n", ""} {
		require.NoError(t, os.WriteFile(path, []byte(bad), 0o600))
		_, err := readCPUTimes(path)
		assert.ErrorContains(t, err, path, "%q", bad)
	}
	_, err = readCPUTimes(filepath.Join(t.TempDir(), "absent"))
	assert.Error(t, err)
}

// watchHostCPU reads the host as busy once more than half of the CPU time between two
// readings was in use, and as not busy again when it is under.
func TestWatchHostCPU(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stat")
	writeStat(t, path, 0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := watchHostCPU(ctx, path, time.Millisecond)
	require.NoError(t, err)
	assert.False(t, h.Busy(), "before a second reading")

	writeStat(t, path, 90, 10) // 90 % in use
	require.Eventually(t, h.Busy, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	assert.True(t, h.Busy(), "readings with no tick since the last say nothing new")
	writeStat(t, path, 100, 100) // then 10 of 100 ticks in use
	require.Eventually(t, func() bool { return !h.Busy() }, 5*time.Second, time.Millisecond)

	_, err = watchHostCPU(ctx, filepath.Join(t.TempDir(), "absent"), time.Millisecond)
	assert.Error(t, err, "a host whose CPU times cannot be read")
}

// On Linux the host's own /proc/stat reads.
func TestReadProcStat(t *testing.T) {
	if _, err := os.Stat(procStat); err != nil {
		t.Skipf("no %s: %v", procStat, err)
	}
	got, err := readCPUTimes(procStat)
	require.NoError(t, err)
	assert.Greater(t, got.total, got.idle)
}
