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
