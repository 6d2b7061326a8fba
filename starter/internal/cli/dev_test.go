package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer that a running command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDevSaysWhereItsStoreIs: `starter dev` tells whoever starts it whether its store is a
// file or memory, which a large batch exhausts (docs/batches.md).
func TestDevSaysWhereItsStoreIs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Temporal server")
	}
	db := filepath.Join(t.TempDir(), "dev.db")
	for _, c := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"memory", nil, "Database         in memory (--db FILE for batches of more than 10,000 tasks)\n"},
		{"file", []string{"--db", db}, "Database         " + db + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var stdout, stderr lockedBuffer
			args := append([]string{"dev", "--no-worker", "--port", "0", "--ui-port", "0"}, c.flags...)
			code := make(chan int, 1)
			go func() { code <- dispatch(ctx, args, &stdout, &stderr) }()
			require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "Serving until interrupted") },
				time.Minute, 50*time.Millisecond, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			cancel()
			assert.Equal(t, exitCompleted, <-code, "stderr:\n%s", stderr.String())
			assert.Contains(t, stdout.String(), c.want)
		})
	}
}

// TestDevRefusesBadWorkerCounts: `starter dev` refuses a worker's slot counts that no worker
// accepts, naming the flag's value, before it starts a server: nothing to stop, no port
// taken.
func TestDevRefusesBadWorkerCounts(t *testing.T) {
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--max-concurrent-activities", "-1"}, "max concurrent activities -1 must not be negative"},
		{[]string{"--yield-activities", "-2"}, `invalid value "-2" for flag -yield-activities: want a count of 0 or more, or auto`},
		{[]string{"--max-concurrent-activities", "4", "--yield-activities", "4"}, "yield activities 4 must be fewer than the worker's 4 activity slots"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"dev", "--port", "0", "--ui-port", "0"}, c.flags...)
		assert.Equal(t, exitUsage, dispatch(t.Context(), args, &stdout, &stderr), "%v", c.flags)
		assert.Contains(t, stderr.String(), c.want, "%v", c.flags)
		assert.Empty(t, stdout.String(), "%v: nothing started", c.flags)
	}
}
