package app

import (
	"bytes"
	"io"
	"testing"
)

// TestMainRefusesBadInvocations: a bad flag, a bad flag value or a word that is not a flag
// (a mistyped subcommand) exits 2 naming it, before anything connects to Temporal.
func TestMainRefusesBadInvocations(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, `worker: unexpected argument "serve"`},
		{[]string{"--task-queue", "q", "extra"}, `worker: unexpected argument "extra"`},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"--model-concurrency", "openai-compatible=0"}, `want PROVIDER=N with N at least 1: "openai-compatible=0"`},
		{[]string{"--yield-activities", "8", "--max-concurrent-activities", "8"}, "worker: app: yield activities 8 must be fewer than the worker's 8 activity slots"},
		{[]string{"--pollers", "1"}, "worker: app: pollers 1: want 2 or more"},
		{[]string{"--yield-activities", "-1"}, `want a count of 0 or more, or auto: "-1"`},
	} {
		var stderr bytes.Buffer
		if code := Main(append([]string{"worker"}, tc.args...), io.Discard, &stderr); code != 2 {
			t.Errorf("Main(%q) = %d, want 2 (stderr: %s)", tc.args, code, stderr.String())
		}
		if !bytes.Contains(stderr.Bytes(), []byte(tc.want)) {
			t.Errorf("Main(%q) stderr = %q, want it to contain %q", tc.args, stderr.String(), tc.want)
		}
	}
}
