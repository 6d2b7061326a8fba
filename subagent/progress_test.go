package subagent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProgressReadsAsOneLine(t *testing.T) {
	assert.Equal(t, "running: step 7, 3.2 kB streamed",
		Progress{Phase: "running", Steps: 7, StreamedBytes: 3200}.String())
	assert.Equal(t, "step 0, 512 B streamed", Progress{StreamedBytes: 512}.String())
	assert.Equal(t, "prompted: step 2, 1.4 MB streamed, 812 tokens",
		Progress{Phase: "prompted", Steps: 2, StreamedBytes: 1_400_000, OutputTokens: 812}.String())
}

func TestProgressSummaryComesFirstInTheDetails(t *testing.T) {
	p := Progress{Phase: "running", Steps: 7, StreamedBytes: 3200}
	p.Summary = p.String()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	assert.Equal(t, `{"summary":"running: step 7, 3.2 kB streamed","phase":"running","steps":7,"streamedBytes":3200,"outputTokens":0}`, string(b))
}
