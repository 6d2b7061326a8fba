package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestGCRefusesNonPositiveOlderThan: an --older-than of zero or less is a usage error naming
// the flag, before anything dials Temporal (TEMPORAL_ADDRESS points nowhere), not the usage
// line alone nor a cleanup at the default retention.
func TestGCRefusesNonPositiveOlderThan(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	for _, v := range []string{"-1h", "0s", "0"} {
		var stdout, stderr bytes.Buffer
		code := runGC(context.Background(), []string{"--older-than", v}, &stdout, &stderr)
		assert.Equal(t, exitUsage, code, "--older-than %s", v)
		assert.Contains(t, stderr.String(), "starter gc: --older-than ", "--older-than %s", v)
		assert.Contains(t, stderr.String(), "want a positive duration", "--older-than %s", v)
		assert.NotContains(t, stderr.String(), "usage:", "--older-than %s", v)
		assert.Empty(t, stdout.String())
	}
}
