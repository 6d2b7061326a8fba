package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/worker/app"
)

func TestMain(m *testing.M) {
	// The demo's sdk child is this test binary, as it is the starter in production.
	app.MaybeRunChildRuntime()
	os.Exit(m.Run())
}

// TestDemoExit runs the README's main job offline, on free ports, and checks that every
// showcase ended as it should and that the table and the UI address are printed.
func TestDemoExit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Temporal server")
	}
	t.Setenv("DEEPSEEK_API_KEY", "")
	var stdout, stderr bytes.Buffer
	code := dispatch(t.Context(), []string{"demo", "--exit", "--port", "0", "--ui-port", "0"}, &stdout, &stderr)
	require.Equal(t, exitCompleted, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "Model            scripted")
	for _, row := range []string{"spawn ", "fork ", "structured ", "sdk ", "cancelled "} {
		assert.Contains(t, out, "\n"+row, "results table row %q", row)
	}
	assert.Equal(t, 4, strings.Count(out, " completed "))
	assert.Equal(t, 1, strings.Count(out, " aborted "))
	assert.Contains(t, out, "/namespaces/default/workflows")
	assert.NotContains(t, out, "FAILED")
}
