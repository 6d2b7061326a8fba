package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/devserver"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestWorkerProgramLogsIDsAndServesMetrics runs the real worker binary against an embedded
// server: a run's log lines (JSON on stderr) carry its workflow, run and child ids, and
// /metrics answers with the SDK's temporal_ metrics, and --pprof-addr serves the process's heap
// profile.
func TestWorkerProgramLogsIDsAndServesMetrics(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "worker")
	build := exec.Command("go", "build", "-o", bin, "../worker")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build worker: %s", out)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI, LogLevel: "error", LogWriter: io.Discard})
	require.NoError(t, err)
	defer func() { _ = srv.Stop() }()
	c, err := srv.NewClient(ctx)
	require.NoError(t, err)
	defer c.Close()

	taskQueue := "workerprogram" // label values are sanitized to [a-zA-Z0-9_]
	cmd := exec.Command(bin, "--task-queue", taskQueue, "--session-root", filepath.Join(tmp, "sessions"),
		"--metrics-addr", "127.0.0.1:0", "--pprof-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+srv.FrontendAddr(), "TEMPORAL_NAMESPACE="+srv.Namespace())
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	var logs logLines
	go logs.read(stderr)

	metricsURL := logs.waitFor(t, func(l map[string]any) bool { return l["msg"] == "serving metrics" })["url"].(string)

	script := filepath.Join(tmp, "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses": [{"text": "logged answer"}]}`), 0o644))
	route := session.Route{Provider: model.ProviderScripted, Model: script}
	in := workflows.StartInput{
		Provider: subagent.ProviderSpawn,
		Request: subagent.Request{
			Prompt: []session.Block{session.Text("answer")}, Parent: subagent.ParentRef{Cwd: tmp}, AgentOptions: route,
		},
		Root: &workflows.RootSession{Cwd: tmp, Route: route},
	}
	pub, run, err := subflow.Start(ctx, c, subflow.StartOptions{TaskQueue: taskQueue, Input: in})
	require.NoError(t, err)
	var result workflows.Outcome
	require.NoError(t, run.Get(ctx, &result))
	assert.Equal(t, subagent.StopCompleted, result.Result.StopReason)

	line := logs.waitFor(t, func(l map[string]any) bool { return l["msg"] == "drive finished" })
	assert.Equal(t, run.GetID(), line["workflowId"])
	assert.Equal(t, run.GetRunID(), line["runId"])
	assert.Equal(t, pub.ChildID, line["childId"])
	assert.Equal(t, "info", line["level"])

	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get(metricsURL)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		body = string(raw)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, "temporal_activity_execution_latency")
	}, waitLimit, 100*time.Millisecond, "metrics never showed the run's activities")
	assert.True(t, strings.Contains(body, "temporal_request_total"), "the client's request counter is exported")
	assert.True(t, strings.Contains(body, `task_queue="`+taskQueue+`"`), "metrics are labelled with the task queue")

	profilesURL := logs.waitFor(t, func(l map[string]any) bool { return l["msg"] == "serving profiles" })["url"].(string)
	resp, err := http.Get(profilesURL + "heap?debug=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	heap, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, strings.HasPrefix(string(heap), "heap profile:"), "the heap profile is served: %.80s", heap)
}

// logLines collects the JSON log lines of a process.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (l *logLines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			line = map[string]any{"unparsed": sc.Text()}
		}
		l.mu.Lock()
		l.lines = append(l.lines, line)
		l.mu.Unlock()
	}
}

// waitFor returns the first line that matches.
func (l *logLines) waitFor(t *testing.T, match func(map[string]any) bool) map[string]any {
	t.Helper()
	var found map[string]any
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, line := range l.lines {
			if match(line) {
				found = line
				return true
			}
		}
		return false
	}, waitLimit, 20*time.Millisecond, "no such log line in %v", l.snapshot)
	return found
}

func (l *logLines) snapshot() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]map[string]any(nil), l.lines...)
}
