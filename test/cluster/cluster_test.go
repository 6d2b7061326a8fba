package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/workflows"
)

// clusterEnv is the variable that turns these tests on: the state directory of a cluster
// that deploy/local-cluster/up started, whose export line is in the environment.
const clusterEnv = "SUBFLOW_TEST_CLUSTER"

// waitLimit only keeps a broken test from hanging; no test asserts a duration.
const waitLimit = 10 * time.Minute

// env is what the tests share: the cluster's state directory, a client, the starter.
var env struct {
	dir     string
	script  string // deploy/local-cluster/cluster.sh
	starter string
	c       client.Client
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env.dir = os.Getenv(clusterEnv)
	if env.dir == "" {
		fmt.Println("cluster tests skip: " + clusterEnv + " is unset (eval \"$(deploy/local-cluster/up)\"; export " + clusterEnv + "=STATE_DIR)")
		return m.Run()
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.script = filepath.Join(root, "deploy", "local-cluster", "cluster.sh")
	env.starter = filepath.Join(env.dir, "bin", "starter")
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if env.c, err = client.Dial(opts); err != nil {
		fmt.Fprintln(os.Stderr, "cluster tests: dial:", err)
		return 1
	}
	defer env.c.Close()
	return m.Run()
}

func needCluster(t *testing.T) {
	t.Helper()
	if env.dir == "" {
		t.Skip(clusterEnv + " is unset")
	}
}

// starter runs the starter binary in dir and returns its exit code, stdout and stderr.
func starter(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.starter, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "run starter %v: %v", args, err)
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// clusterCmd runs deploy/local-cluster/cluster.sh with args on the cluster under test.
func clusterCmd(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(env.script, args...)
	cmd.Env = append(os.Environ(), "SUBFLOW_CLUSTER_DIR="+env.dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "cluster.sh %v: %s", args, stderr.String())
	return strings.TrimSpace(string(out))
}

// script writes a scripted-model script of responses into dir and returns its path.
func script(t testing.TB, dir string, responses ...string) string {
	t.Helper()
	path := filepath.Join(dir, uuid.NewString()+".json")
	body := `{"responses": [` + strings.Join(responses, ",") + "]}"
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	return path
}

// writeTasks writes n tasks answering from scriptPath as a JSONL file in dir.
func writeTasks(t *testing.T, dir, scriptPath string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		line, err := json.Marshal(workflows.Task{Provider: subagent.ProviderSpawn, Task: fmt.Sprintf("task %d", i),
			Cwd: dir, ModelProvider: model.ProviderScripted, Model: scriptPath})
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(dir, "tasks.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

// results parses `starter batch results` output: each task once.
func results(t *testing.T, stdout string) map[int]workflows.BatchResult {
	t.Helper()
	got := map[int]workflows.BatchResult{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r workflows.BatchResult
		require.NoError(t, json.Unmarshal([]byte(line), &r), "line %q", line)
		_, dup := got[r.Index]
		require.False(t, dup, "task %d has two results", r.Index)
		got[r.Index] = r
	}
	return got
}

// requireAllCompleted checks that `starter batch results ID` returns every one of n tasks
// once, completed, with the scripted answer.
func requireAllCompleted(t *testing.T, dir, batchID string, n int, answer string) {
	t.Helper()
	code, stdout, stderr := starter(t, dir, "batch", "results", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	got := results(t, stdout)
	require.Len(t, got, n)
	for i := range n {
		r, ok := got[i]
		require.True(t, ok, "task %d has a result", i)
		assert.Equal(t, subagent.StopCompleted, r.StopReason, "task %d: %s", i, r.Error)
		assert.Equal(t, answer, r.Output, "task %d", i)
	}
}

// TestShowcase runs `starter demo --connect` on the cluster: spawn, fork, structured, sdk and
// cancelled each end as they should (the starter exits 0 only then).
func TestShowcase(t *testing.T) {
	needCluster(t)
	code, stdout, stderr := starter(t, t.TempDir(), "demo", "--connect")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	for _, name := range []string{"spawn", "fork", "structured", "sdk", "cancelled"} {
		assert.Regexp(t, `(?m)^`+name+`\s`, stdout)
	}
	assert.NotContains(t, stdout, "FAILED")

	// Each run is listed by visibility once it closed (a label PostgreSQL's visibility could
	// not store would keep its run out of every list).
	ids := regexp.MustCompile(`subagent-[0-9a-f-]{36}`).FindAllString(stdout, -1)
	require.Len(t, ids, 5, stdout)
	for _, id := range ids {
		query := fmt.Sprintf("WorkflowId = '%s' AND ExecutionStatus != 'Running'", id)
		require.Eventually(t, func() bool {
			resp, err := env.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
			return err == nil && len(resp.GetExecutions()) == 1
		}, time.Minute, 200*time.Millisecond, "visibility lists %s", id)
	}
}

// TestNestedFanOut: a run delegates four tasks at once through the subagent tool, each to a
// nested run; the starter's tree shows the four under the root, and the answer comes back.
func TestNestedFanOut(t *testing.T) {
	needCluster(t)
	dir := t.TempDir()
	leaf := script(t, dir, `{"text": "leaf done"}`)
	type call struct {
		Name  string         `json:"name"`
		Input map[string]any `json:"input"`
	}
	calls := make([]call, 4)
	for i := range calls {
		calls[i] = call{Name: subagenttool.Name, Input: map[string]any{"task": fmt.Sprintf("part %d", i), "label": fmt.Sprintf("part %d", i), "model": leaf}}
	}
	fan, err := json.Marshal(map[string]any{"toolCalls": calls})
	require.NoError(t, err)
	root := script(t, dir, string(fan), `{"text": "fanned out and back"}`)

	code, stdout, stderr := starter(t, dir, "run", "--json", "--cwd", dir, "--model-provider", model.ProviderScripted,
		"--model", root, "fan out")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	var res struct {
		WorkflowID string `json:"workflowId"`
		Output     string `json:"output"`
		StopReason string `json:"stopReason"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), "stdout: %s", stdout)
	assert.Equal(t, "fanned out and back", res.Output)

	code, stdout, stderr = starter(t, dir, "status", "--tree", "--json", res.WorkflowID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, 4, strings.Count(stdout, `"part `), "the four nested runs in the tree: %s", stdout)
	code, stdout, stderr = starter(t, dir, "status", "--tree", res.WorkflowID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, 4, strings.Count(stdout, "part "), "the tree as text: %s", stdout)
}

// cliEnv names the official Temporal CLI binary that TestOfficialCLI runs (.ci/run installs
// github.com/temporalio/cli v1.5.1 with go install, as bench/cli-devserver.sh does).
const cliEnv = "TEMPORAL_CLI"

// TestOfficialCLI: the official temporal CLI lists and describes a run on the cluster by
// subflow's search attributes, through the same client environment the starter reads.
func TestOfficialCLI(t *testing.T) {
	needCluster(t)
	cli := os.Getenv(cliEnv)
	if cli == "" {
		t.Skip(cliEnv + " is unset: go install github.com/temporalio/cli/cmd/temporal@v1.5.1 and set it to the binary")
	}
	dir := t.TempDir()
	label := "cli " + uuid.NewString()[:8]
	code, stdout, stderr := starter(t, dir, "run", "--json", "--cwd", dir, "--label", label, "--model-provider", model.ProviderScripted,
		"--model", script(t, dir, `{"text": "listed"}`), "be listed")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	var res struct {
		WorkflowID string `json:"workflowId"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), "stdout: %s", stdout)

	temporal := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(cli, args...).CombinedOutput()
		require.NoError(t, err, "temporal %v: %s", args, out)
		return string(out)
	}
	query := fmt.Sprintf("WorkflowId = '%s' AND SubagentProvider = 'spawn' AND ExecutionStatus = 'Completed'", res.WorkflowID)
	require.Eventually(t, func() bool {
		return strings.Contains(temporal("workflow", "list", "--query", query, "--output", "json"), res.WorkflowID)
	}, time.Minute, 500*time.Millisecond, "temporal workflow list finds %s", res.WorkflowID)

	var desc struct {
		Info struct {
			Type struct {
				Name string `json:"name"`
			} `json:"type"`
			Status           string `json:"status"`
			SearchAttributes struct {
				IndexedFields map[string]any `json:"indexedFields"`
			} `json:"searchAttributes"`
		} `json:"workflowExecutionInfo"`
	}
	out := temporal("workflow", "describe", "--workflow-id", res.WorkflowID, "--output", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &desc), "temporal workflow describe: %s", out)
	assert.Equal(t, workflows.WorkflowName, desc.Info.Type.Name)
	assert.Equal(t, "WORKFLOW_EXECUTION_STATUS_COMPLETED", desc.Info.Status)
	for _, attr := range []string{"SubagentProvider", "SubagentStopReason", "SubagentLabel"} {
		assert.Contains(t, desc.Info.SearchAttributes.IndexedFields, attr, "describe shows %s: %s", attr, out)
	}
}

// TestBatchAcrossWorkers: a 2,000-task batch runs on both workers, and `starter batch
// results` returns every task once.
func TestBatchAcrossWorkers(t *testing.T) {
	needCluster(t)
	dir := t.TempDir()
	ok := script(t, dir, `{"text": "fine"}`)
	const n = 2000
	before := [2]float64{workerActivities(t, 0), workerActivities(t, 1)}
	code, stdout, stderr := starter(t, dir, "batch", "--concurrency", "200", "--detach", writeTasks(t, dir, ok, n))
	require.Equal(t, 0, code, "stderr: %s", stderr)
	batchID := strings.TrimSpace(stdout)
	sum := waitBatch(t, batchID)
	require.True(t, sum.Completed(), "%+v", sum)
	requireAllCompleted(t, dir, batchID, n, "fine")
	for i := range before {
		assert.Greater(t, workerActivities(t, i), before[i], "worker-%d ran some of the batch", i+1)
	}

}

// waitBatch waits for a batch to end and returns its summary.
func waitBatch(t *testing.T, id string) workflows.BatchSummary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var sum workflows.BatchSummary
	require.NoError(t, env.c.GetWorkflow(ctx, id, "").Get(ctx, &sum))
	return sum
}

// workerActivities is the count of activities worker i (0 or 1) has run, from its
// Prometheus metrics.
func workerActivities(t *testing.T, i int) float64 {
	t.Helper()
	return metric(t, i, "temporal_activity_execution_latency_seconds_count")
}

// metric sums the samples of the Prometheus metric name that worker i (0 or 1) serves
// (cluster.sh writes each worker's metrics address beside its pid file).
func metric(t *testing.T, i int, name string) float64 {
	t.Helper()
	addr, err := os.ReadFile(filepath.Join(env.dir, "run", fmt.Sprintf("worker-%d.metrics", i+1)))
	require.NoError(t, err)
	resp, err := http.Get("http://" + strings.TrimSpace(string(addr)) + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ")) {
			fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
			if len(fields) > 0 {
				v, err := strconv.ParseFloat(fields[0], 64)
				require.NoError(t, err, "line %q", line)
				sum += v
			}
		}
	}
	return sum
}
