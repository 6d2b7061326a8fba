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
