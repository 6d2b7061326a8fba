package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// coveredElsewhere are the rejection rules the table below has no case for, each with the
// test that covers it: every other rule (workflows.RejectionRules) must have a case, so a new
// rule comes with its end-to-end case.
var coveredElsewhere = map[string]string{
	subagent.RuleUnknownProvider:       "workflows.TestValidationRejectsBeforeAnythingRuns",
	subagent.RuleUnsupportedCapability: "TestStarterRejections",
	subagent.RuleInvalidMaxDepth:       "workflows.TestValidationRejectsBeforeAnythingRuns",
	subagent.RuleUnsupportedSchema:     "workflows.TestValidationRejectsBeforeAnythingRuns",
	subagent.RuleInvalidStoredDepth:    "inprocess.TestStartDepthRules (a stored header only a corrupt store holds)",
	subagent.RuleInvalidRuntimeDepth:   "inprocess.TestStartDepthRules (a runtime depth only an agent sets)",
	subagent.RuleDepthOverflow:         "inprocess.TestStartDepthRules",
	subagent.RuleDepthExceeded:         "TestStarterRejections",
	subagent.RuleInvalidMaxDepthConfig: "subagent.TestMaxDepthSettingCheckProvider (the subagent tool's setting, not a start)",
	subagent.RuleDepthLimitUnsupported: "subagent.TestMaxDepthSettingCheckProvider (the subagent tool's setting, not a start)",
	subagent.RuleEmptyCwd:              "workdir.TestResolve (the sdk cwd rules, docs/sdk-children.md)",
	subagent.RuleMissingCwd:            "workflows.TestSDKRejectionBeforeHandshakeReachesTheCaller",
	subagent.RuleRelativeCwd:           "workdir.TestResolve (the sdk cwd rules, docs/sdk-children.md)",
	workflows.RuleMissingParent:        "workflows.TestValidationRejectsBeforeAnythingRuns",
	workflows.RuleUnknownTool:          "TestStarterRejections",
	workflows.RuleSessionConflict:      "storetest (create-if-absent with another header)",
	workflows.RuleNoSDKProvider:        "activities.TestRunSDKChildWithoutCommandIsARejection",
	workflows.RuleInvalidSandboxMode:   "inprocess.TestUnknownParentSandboxModeIsRejected",
	workflows.RuleReservedID:           "TestAdmissionIDSquat",
	workflows.RuleInvalidWorkflowID:    "TestUpFrontRejectionsStartNothing (starter --id)",
	workflows.RuleOutsideWorkspace:     "TestWorkspaceRootsAreABoundary",
}

// rejection is one row of the rejection table: a start through the starter (cli: the
// arguments of `starter run` or `starter batch`), or through the JSON contract by type name
// (workflow and input, as a caller in another language sends it). msg is what stderr or the
// rejection's message contains.
type rejection struct {
	name     string
	rule     string
	cli      []string
	workflow string
	input    string
	msg      string
}

// TestRejectionTable: every start the rules refuse, through the starter and through the JSON
// contract, on the file session store. See rejectionTable.
func TestRejectionTable(t *testing.T) {
	t.Parallel()
	rejectionTable(t, "")
}

// TestRejectionTablePostgres is TestRejectionTable on the Postgres session store, in a schema
// of its own (SUBFLOW_TEST_POSTGRES, see .ci/postgres.sh).
func TestRejectionTablePostgres(t *testing.T) {
	t.Parallel()
	dsn := os.Getenv("SUBFLOW_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("SUBFLOW_TEST_POSTGRES is not set (eval \"$(.ci/postgres.sh)\")")
	}
	rejectionTable(t, freshPostgresSchema(t, dsn))
}

// rejectionTable runs every row against a worker of its own, on a task queue and with a
// session store storeSpec of its own, so that it runs beside other tests (most of its time is
// the running victim's 30 s answer). The starter exits 2 naming the field; a start by type
// name fails with the rule's named rejection. Nothing is written: the store's listing is the
// same before and after every row; no run the starter started is left Failed. A child id of
// another run's session — one finished, one running — is refused and the victim is
// untouched: the finished one's sessions are unchanged, the running one ends with its own
// answer.
func rejectionTable(t *testing.T, storeSpec string) {
	ctx := context.Background()
	f := newFaultEnv(t, storeSpec)
	bin, err := workerBin()
	require.NoError(t, err)
	f.startWorker("--gc-every", "0", "--sdk-command", bin, "--sdk-arg", app.ChildRuntimeArg)

	cwd, scripts := t.TempDir(), t.TempDir()
	answer := script(t, scripts, `{"text": "never"}`)
	missing := filepath.Join(t.TempDir(), "missing")
	long := strings.Repeat("p", 300)
	q := func(s string) string {
		raw, err := json.Marshal(s)
		require.NoError(t, err)
		return string(raw)
	}
	route := fmt.Sprintf(`{"provider": "scripted", "model": %s}`, q(answer))
	prompt := `[{"type": "text", "text": "attack"}]`
	// start is a StartSubagent input by type name: a root run in cwd with req as its request
	// and extra as more top-level fields.
	start := func(req, extra string) string {
		in := fmt.Sprintf(`{"provider": "spawn", "request": %s, "root": {"cwd": %s, "route": %s}`, req, q(cwd), route)
		if extra != "" {
			in += ", " + extra
		}
		return in + "}"
	}
	request := func(extra string) string {
		r := fmt.Sprintf(`{"prompt": %s, "agentOptions": %s`, prompt, route)
		if extra != "" {
			r += ", " + extra
		}
		return r + "}"
	}

	// The victims: a run that finished, and one still running, each under a child id.
	victimIn := rootInput(subagent.ProviderSpawn, cwd, script(t, scripts, `{"text": "the victim's answer"}`), "be the victim")
	victimIn.ChildID = "victim-" + uuid.NewString()
	_, victimRun := f.start(victimIn)
	victimOut, _ := outcome(t, victimRun)
	require.Equal(t, "the victim's answer", session0Text(victimOut))
	runningIn := rootInput(subagent.ProviderSpawn, cwd, script(t, scripts,
		`{"text": "the running victim's answer", "chunks": 40, "delayMs": 30000}`), "be the running victim")
	runningIn.ChildID = "running-" + uuid.NewString()
	_, runningRun := f.start(runningIn)
	waitStreaming(t, runningRun)
	// The running victim writes while the table runs: its sessions are compared by its end.
	running := []string{runningIn.ChildID, workflows.RootSessionID(runningIn.ChildID)}

	// A batch that ran, whose id a second batch may not take.
	usedBatch := "batch-" + uuid.NewString()
	oneTask := writeTaskFile(t, t.TempDir(), []workflows.Task{scriptedTask(subagent.ProviderSpawn, cwd, script(t, scripts, `{"text": "ok"}`), "task")})
	code, _, stderr := runStarter(t, cwd, "batch", "--id", usedBatch, "--task-queue", f.taskQueue, "--out", filepath.Join(t.TempDir(), "out.jsonl"), oneTask)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	dupFile := filepath.Join(t.TempDir(), "dup.jsonl")
	require.NoError(t, os.WriteFile(dupFile, []byte(`{"task": "a", "id": "same"}`+"\n"+`{"task": "b", "id": "same"}`+"\n"), 0o644))

	run := func(args ...string) []string {
		return append(append([]string{"run", "--task-queue", f.taskQueue, "--model-provider", "scripted", "--model", answer}, args...), "attack")
	}
	batch := func(args ...string) []string {
		return append([]string{"batch", "--task-queue", f.taskQueue}, args...)
	}
	table := []rejection{
		// First, while the running victim still runs.
		{name: "childId of a running run", rule: workflows.RuleChildIDTaken, workflow: workflows.WorkflowName,
			input: start(request(""), `"childId": `+q(runningIn.ChildID)),
			msg:   fmt.Sprintf("subagent childId %q is taken: its root session %s was created by workflow %s/", runningIn.ChildID, workflows.RootSessionID(runningIn.ChildID), runningRun.GetID())},
		// `starter run`: refused before any workflow starts, or by the worker before it
		// writes (the run then removed).
		{name: "unknown parent", rule: workflows.RuleParentNotFound, cli: run("--cwd", cwd, "--parent", "no-such-session"),
			msg: `subagent parent session "no-such-session" not found`},
		{name: "unknown parent, sdk", rule: workflows.RuleParentNotFound, cli: run("--provider", "sdk", "--cwd", cwd, "--parent", "no-such-session"),
			msg: `subagent parent session "no-such-session" not found`},
		{name: "unknown parent, sdk, no cwd", rule: workflows.RuleParentNotFound, cli: run("--provider", "sdk", "--parent", "no-such-session"),
			msg: `subagent parent session "no-such-session" not found`},
		{name: "blank parent", rule: workflows.RuleInvalidSessionID, cli: run("--cwd", cwd, "--parent", " "),
			msg: `starter run: --parent: invalid session id " ": contains ' '`},
		{name: "parent like a flag", rule: workflows.RuleInvalidSessionID, cli: run("--cwd", cwd, "--parent", "-x"),
			msg: `starter run: --parent: invalid session id "-x": starts with '-'`},
		{name: "parent of 300 bytes", rule: workflows.RuleInvalidSessionID, cli: run("--cwd", cwd, "--parent", long),
			msg: "300 bytes, over the limit of 128"},
		{name: "missing cwd", rule: subagent.RuleInaccessibleCwd, cli: run("--cwd", missing),
			msg: "is not an accessible directory: " + missing},
		{name: "unknown model provider", rule: subagent.RuleUnknownModel, cli: run("--cwd", cwd, "--model-provider", "nope-llm"),
			msg: `subagent model provider "nope-llm" is unknown (agentOptions.provider)`},
		{name: "unknown model provider, sdk", rule: subagent.RuleUnknownModel, cli: run("--provider", "sdk", "--cwd", cwd, "--model-provider", "nope-llm", "--model", "m"),
			msg: `no adapter registered for provider "nope-llm"`},
		{name: "negative timeout", rule: workflows.RuleInvalidTimeout, cli: run("--cwd", cwd, "--timeout", "-5s"),
			msg: "starter run: --timeout must be positive: -5s"},
		{name: "zero timeout", rule: workflows.RuleInvalidTimeout, cli: run("--cwd", cwd, "--timeout", "0"),
			msg: "starter run: --timeout must be positive: 0s"},
		{name: "label over the server's limit", rule: subagent.RuleInvalidLabel, cli: run("--cwd", cwd, "--label", strings.Repeat("l", 100_000)),
			msg: "starter run: --label: subagent request.label is 100002 bytes encoded, over the server's limit of 2048 bytes"},
		{name: "negative maxTokens", rule: subagent.RuleInvalidTokens, cli: run("--cwd", cwd, "--max-tokens", "-5"),
			msg: "starter run: --max-tokens must be a positive integer: -5"},
		// `starter batch`: refused before the batch starts.
		{name: "duplicate task ids", rule: workflows.RuleDuplicateTaskID, cli: batch(dupFile),
			msg: `task id "same" is also the id of line 1`},
		{name: "concurrency 0", rule: workflows.RuleInvalidConcurrency, cli: batch("--concurrency", "0", oneTask),
			msg: "starter batch: --concurrency must be at least 1: 0"},
		{name: "batch id used", rule: workflows.RuleBatchIDUsed, cli: batch("--id", usedBatch, oneTask),
			msg: fmt.Sprintf("starter batch: batch %q already ran (completed, ended ", usedBatch)},
		{name: "task queue nobody polls", rule: workflows.RuleUnknownTaskQueue, cli: []string{"batch", "--task-queue", "nowhere-" + f.taskQueue, oneTask},
			msg: `starter batch: no worker polls the task queue "nowhere-` + f.taskQueue + `"`},

		// The JSON contract: the workflow refuses the input before any activity writes.
		{name: "no request", rule: subagent.RuleMissingPrompt, workflow: workflows.WorkflowName,
			input: fmt.Sprintf(`{"provider": "spawn", "root": {"cwd": %s, "route": %s}}`, q(cwd), route),
			msg:   "subagent request has no prompt: request.prompt needs at least one block"},
		{name: "image block", rule: subagent.RuleUnsupportedBlock, workflow: workflows.WorkflowName,
			input: start(fmt.Sprintf(`{"prompt": [{"type": "image"}], "agentOptions": %s}`, route), ""),
			msg:   `subagent request.prompt[0] has type "image"`},
		{name: "label of 100,000 bytes", rule: subagent.RuleInvalidLabel, workflow: workflows.WorkflowName,
			input: start(request(`"label": `+q(strings.Repeat("l", 100_000))), ""),
			msg:   "subagent request.label is 100002 bytes encoded"},
		{name: "maxTokens -5", rule: subagent.RuleInvalidTokens, workflow: workflows.WorkflowName,
			input: start(fmt.Sprintf(`{"prompt": %s, "agentOptions": {"provider": "scripted", "model": %s, "maxTokens": -5}}`, prompt, q(answer)), ""),
			msg:   "subagent request.agentOptions.maxTokens must be a non-negative safe integer: -5"},
		{name: "agentOptions.provider nope-llm", rule: subagent.RuleUnknownModel, workflow: workflows.WorkflowName,
			input: start(fmt.Sprintf(`{"prompt": %s, "agentOptions": {"provider": "nope-llm"}}`, prompt), ""),
			msg:   `subagent model provider "nope-llm" is unknown`},
		{name: "childId ../../escape", rule: workflows.RuleInvalidChildID, workflow: workflows.WorkflowName,
			input: start(request(""), `"childId": "../../escape"`),
			msg:   `subagent childId: invalid session id "../../escape": contains a path separator`},
		{name: "childId a/b", rule: workflows.RuleInvalidChildID, workflow: workflows.WorkflowName,
			input: start(request(""), `"childId": "a/b"`),
			msg:   `subagent childId: invalid session id "a/b": contains a path separator`},
		{name: "childId of 300 bytes", rule: workflows.RuleInvalidChildID, workflow: workflows.WorkflowName,
			input: start(request(""), `"childId": `+q(long)),
			msg:   "300 bytes, over the limit of 128"},
		{name: "unknown parent", rule: workflows.RuleParentNotFound, workflow: workflows.WorkflowName,
			input: fmt.Sprintf(`{"provider": "spawn", "request": {"prompt": %s, "parent": {"sessionId": "no-such-session"}}}`, prompt),
			msg:   `subagent parent session "no-such-session" not found`},
		{name: "unknown parent, sdk", rule: workflows.RuleParentNotFound, workflow: workflows.WorkflowName,
			input: fmt.Sprintf(`{"provider": "sdk", "request": {"prompt": %s, "parent": {"sessionId": "no-such-session", "cwd": %s}}}`, prompt, q(cwd)),
			msg:   `subagent parent session "no-such-session" not found`},
		{name: "timeout -5s", rule: workflows.RuleInvalidTimeout, workflow: workflows.WorkflowName,
			input: start(request(""), `"timeout": "-5s"`),
			msg:   "subagent timeout must be a positive duration"},
		{name: "timeout 0", rule: workflows.RuleInvalidTimeout, workflow: workflows.WorkflowName,
			input: start(request(""), `"timeout": 0`),
			msg:   "subagent timeout must be a positive duration"},
		{name: "model over the server's limit", rule: workflows.RuleInvalidAttribute, workflow: workflows.WorkflowName,
			input: start(fmt.Sprintf(`{"prompt": %s, "agentOptions": {"provider": "scripted", "model": %s}}`, prompt, q(strings.Repeat("m", 3000))), ""),
			msg:   "subagent request.agentOptions.model is 3002 bytes encoded"},
		{name: "childId of a finished run", rule: workflows.RuleChildIDTaken, workflow: workflows.WorkflowName,
			input: start(request(""), `"childId": `+q(victimIn.ChildID)),
			msg:   fmt.Sprintf("subagent childId %q is taken: its root session %s was created by workflow %s/", victimIn.ChildID, workflows.RootSessionID(victimIn.ChildID), victimRun.GetID())},
		{name: "batch concurrency 0", rule: workflows.RuleInvalidConcurrency, workflow: workflows.BatchWorkflowName,
			input: fmt.Sprintf(`{"total": 1, "tasks": [{"task": "t", "cwd": %s}], "concurrency": 0}`, q(cwd)),
			msg:   "batch concurrency must be at least 1 (leave it out for 10): 0"},
		{name: "batch concurrency -3", rule: workflows.RuleInvalidConcurrency, workflow: workflows.BatchWorkflowName,
			input: fmt.Sprintf(`{"total": 1, "tasks": [{"task": "t", "cwd": %s}], "concurrency": -3}`, q(cwd)),
			msg:   "batch concurrency must be at least 1 (leave it out for 10): -3"},
		{name: "batch duplicate task ids", rule: workflows.RuleDuplicateTaskID, workflow: workflows.BatchWorkflowName,
			input: fmt.Sprintf(`{"total": 2, "tasks": [{"task": "a", "cwd": %s, "id": "same"}, {"task": "b", "cwd": %s, "id": "same"}]}`, q(cwd), q(cwd)),
			msg:   `batch tasks 0 and 1 have the same id "same"`},
	}

	t.Run("every rule has a case", func(t *testing.T) {
		for _, rule := range workflows.RejectionRules() {
			_, elsewhere := coveredElsewhere[rule]
			has := slices.ContainsFunc(table, func(r rejection) bool { return r.rule == rule })
			assert.True(t, has || elsewhere, "rule %s has no case in the rejection table and no test named in coveredElsewhere", rule)
		}
	})

	before := storeListing(t, f.store, running...)
	var jsonRuns []string
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cli != nil {
				code, stdout, stderr := runStarter(t, cwd, tc.cli...)
				assert.Equal(t, 2, code, "stderr: %s", stderr)
				assert.Empty(t, stdout)
				assert.Contains(t, stderr, tc.msg)
			} else {
				var input any
				require.NoError(t, json.Unmarshal([]byte(tc.input), &input))
				id := "json-" + uuid.NewString()
				jsonRuns = append(jsonRuns, id)
				run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: f.taskQueue}, tc.workflow, input)
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(ctx, waitLimit)
				defer cancel()
				ve := workflows.Rejection(run.Get(ctx, nil))
				require.NotNil(t, ve, "a named rejection")
				assert.Equal(t, tc.rule, ve.Rule)
				assert.Contains(t, ve.Message, tc.msg)
			}
			assert.Equal(t, before, storeListing(t, f.store, running...), "nothing written")
		})
	}

	// The starter left no run Failed: it refused before starting, or removed what its worker
	// rejected. (A start by type name fails its own run, as the contract says.)
	query := onQueue(f.taskQueue) + " AND ExecutionStatus = 'Failed'"
	for _, id := range jsonRuns {
		query += fmt.Sprintf(" AND WorkflowId != %q", id)
	}
	// Deletion reaches visibility asynchronously: wait until the list is empty.
	var left []string
	assert.Eventually(t, func() bool {
		resp, err := env.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return false
		}
		left = left[:0]
		for _, e := range resp.GetExecutions() {
			left = append(left, e.GetExecution().GetWorkflowId())
		}
		return len(left) == 0
	}, waitLimit, 200*time.Millisecond, "runs left Failed: %v", &left)

	// The victims: the finished one reads as before, the running one ends with its own answer.
	out, _ := outcome(t, victimRun)
	assert.Equal(t, "the victim's answer", session0Text(out))
	runningOut, _ := outcome(t, runningRun)
	assert.Equal(t, "the running victim's answer", session0Text(runningOut))
	store := f.openStore()
	for _, id := range []string{victimIn.ChildID, runningIn.ChildID} {
		for _, e := range load(t, store, id) {
			assert.NotContains(t, string(e.Data), "attack", "the attacker's prompt never reached %s", id)
		}
	}
}

// session0Text is the text of an outcome's output.
func session0Text(out workflows.Outcome) string {
	var b strings.Builder
	for _, blk := range out.Result.Output {
		b.WriteString(blk.Text)
	}
	return b.String()
}

// storeListing is what a session store holds but the sessions in except: for a directory,
// every path under it, directories included (an empty stub directory counts), with each
// file's size; for Postgres, the rows and bytes of each table (footprint).
func storeListing(t *testing.T, spec string, except ...string) map[string]int64 {
	t.Helper()
	if strings.HasPrefix(spec, "postgres") {
		return footprint(t, spec, except)
	}
	out := map[string]int64{}
	err := filepath.WalkDir(spec, func(path string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) && path == spec {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(spec, path)
		if slices.Contains(except, strings.Split(rel, string(filepath.Separator))[0]) {
			return nil
		}
		if d.IsDir() {
			out[rel+"/"] = -1
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[rel] = info.Size()
		return nil
	})
	require.NoError(t, err)
	return out
}
