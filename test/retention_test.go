package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// retentionRuns is the number of short runs the retention tests clean up after: over 600
// sessions with their roots, so that the killed cleanup, at 50 a page, is killed a few pages
// in and the full one walks several of its default pages (workflows.CleanupPageSize).
const retentionRuns = 300

// retention is the retention the retention tests give their workers (--retention): short,
// since each test waits it out between its runs and the cleanup.
const retention = 5 * time.Second

// TestRetentionCleanup runs 300 short runs (a batch, some with results and requests stored
// by reference) on the file store with a short retention (worker --retention), then
// the cleanup: a dry run through `starter gc` removes nothing; a cleanup killed mid-way (its
// worker SIGKILLed, its workflow terminated) loses nothing it should keep; the next
// scheduled one finishes, and the store is back to its size before the runs, but for what a
// run that kept running through it owns — its session and its parent session, the session
// of a run closed long before, which it still reads. That run then completes.
func TestRetentionCleanup(t *testing.T) {
	t.Parallel()
	retentionCleanup(t, "")
}

// TestRetentionCleanupPostgres is TestRetentionCleanup on the Postgres session store, in a
// schema of its own so its rows can be counted (SUBFLOW_TEST_POSTGRES, see .ci/postgres.sh).
func TestRetentionCleanupPostgres(t *testing.T) {
	t.Parallel()
	dsn := os.Getenv("SUBFLOW_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("SUBFLOW_TEST_POSTGRES is not set (eval \"$(.ci/postgres.sh)\")")
	}
	retentionCleanup(t, freshPostgresSchema(t, dsn))
}

func retentionCleanup(t *testing.T, storeSpec string) {
	ctx := context.Background()
	f := newFaultEnv(t, storeSpec)
	store := f.openStore()
	queue2 := f.taskQueue + "-long" // the long run's, served by workers of its own
	t.Cleanup(func() {
		for _, q := range []string{f.taskQueue, queue2} {
			_ = env.c.ScheduleClient().GetHandle(ctx, subflow.CleanupScheduleID(q)).Delete(ctx)
		}
	})

	// Before: a session no run owns (written before owners were recorded), never removed.
	legacy := "legacy-" + uuid.NewString()
	require.NoError(t, store.Create(ctx, session.Header{ID: legacy, Cwd: "/"}))
	ev, err := session.NewEvent(session.TypeSandboxMode, session.SandboxModeData{Mode: "read-only"})
	require.NoError(t, err)
	require.NoError(t, store.Append(ctx, legacy, ev))
	before := footprint(t, f.store, nil)

	// The worker creates the queue's cleanup Schedule, which the test triggers itself: the
	// default hourly one would clean up on its own once within the hour, in the middle of the
	// test.
	w1 := f.startWorker("--retention", retention.String(), "--gc-every", "8760h")
	long := f.startWorkerOn(queue2, "--gc-every", "0")
	cwd := t.TempDir()

	// The parent: a short run, closed long before the cleanup. Its child session becomes the
	// parent session of the long run.
	parentPub, parentRun := f.start(rootInput(subagent.ProviderSpawn, cwd, script(t, t.TempDir(), `{"text": "parent here"}`), "be the parent"))
	_, _ = outcome(t, parentRun)
	parentEvents := load(t, store, parentPub.ChildID)

	// The long run, on its own queue: once it streams, its worker is killed, so it keeps
	// running, waiting for a worker, through every cleanup below.
	longIn := rootInput(subagent.ProviderSpawn, cwd, script(t, t.TempDir(),
		`{"text": "still here after the cleanup", "chunks": 40, "delayMs": 2000}`), "outlive the cleanup")
	longIn.Root = nil
	longIn.Request.Parent = subagent.ParentRef{SessionID: parentPub.ChildID, Cwd: cwd}
	longPub, longRun, err := subflow.Start(ctx, env.c, subflow.StartOptions{TaskQueue: queue2, Input: longIn})
	require.NoError(t, err)
	waitStreaming(t, longRun)
	long.kill()
	keep := []string{parentPub.ChildID, longPub.ChildID}

	// The short runs: a batch through the starter, as users run it. Two answers and one
	// request are over the inline limit, so they are stored by reference; the starter reads
	// the answers back.
	big := strings.Repeat("x", workflows.PayloadThreshold+1)
	bigText, err := json.Marshal(big)
	require.NoError(t, err)
	small := script(t, t.TempDir(), `{"text": "done"}`)
	large := script(t, t.TempDir(), `{"text": `+string(bigText)+`, "chunks": 4}`)
	var lines []string
	for i := range retentionRuns {
		task := workflows.Task{Task: fmt.Sprintf("task %d", i), Cwd: cwd, ModelProvider: "scripted", Model: small}
		switch i {
		case 10, 20:
			task.Model = large
		case 30:
			task.Task = big
		}
		line, err := json.Marshal(task)
		require.NoError(t, err)
		lines = append(lines, string(line))
	}
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.jsonl")
	require.NoError(t, os.WriteFile(tasks, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	batchID := "batch-" + uuid.NewString()
	code, stdout, stderr := runStarterFor(t, 15*time.Minute, dir, "batch", "--task-queue", f.taskQueue,
		"--concurrency", "50", "--id", batchID, "--out", filepath.Join(dir, "results.jsonl"), tasks)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	results, err := os.ReadFile(filepath.Join(dir, "results.jsonl"))
	require.NoError(t, err)
	assert.Contains(t, string(results), big, "a result stored by reference was read back whole")

	// Reading those results back started a FetchPayload workflow each, none in the default list.
	hiddenFetches := countWorkflows(t, fmt.Sprintf("WorkflowType = %q AND TemporalNamespaceDivision = %q", workflows.FetchPayloadWorkflowName, workflows.HiddenDivision))
	assert.GreaterOrEqual(t, hiddenFetches, 2, "one fetch per big result at least")
	assert.Zero(t, countWorkflows(t, fmt.Sprintf("WorkflowType = %q AND TaskQueue = %q", workflows.FetchPayloadWorkflowName, f.taskQueue)),
		"the default list shows no fetch")

	owned, err := store.(session.Retainer).Owned(ctx, session.OwnedQuery{Before: time.Now().Add(time.Hour), Limit: 100000})
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, o := range owned {
		kind, _, _ := strings.Cut(o.ID, "-")
		if kind != "payload" && kind != "request" && kind != "batchpage" {
			kind = "session"
		}
		kinds[kind]++
	}
	t.Logf("stored with owners: %d %v", len(owned), kinds)
	require.GreaterOrEqual(t, kinds["payload"], 2)
	require.GreaterOrEqual(t, kinds["request"], 1)
	require.GreaterOrEqual(t, len(owned), 2*retentionRuns, "a root and a child session per run")
	removable := len(owned) - len(keep)

	// Everything closed longer than the retention ago once it has passed.
	time.Sleep(retention + 2*time.Second)

	code, stdout, stderr = runStarterFor(t, 5*time.Minute, dir, "gc", "--dry-run", "--older-than", retention.String(), "--task-queue", f.taskQueue)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	t.Logf("starter gc --dry-run:\n%s", stdout)
	assert.Contains(t, stdout, fmt.Sprintf("would remove %d stored items, ", removable))
	assert.Contains(t, stdout, fmt.Sprintf("kept %d", len(keep)))
	assert.Regexp(t, `(?m)^  payload +2  [0-9.]+ KiB$`, stdout)
	assert.Len(t, ownedIDs(t, store), len(owned), "a dry run removes nothing")

	// A cleanup killed mid-way: the test holds the lock of a session halfway through the
	// store, so the cleanup removes what precedes it and then waits, and is killed there.
	var removableIDs []string
	for _, o := range owned {
		if !slices.Contains(keep, o.ID) {
			removableIDs = append(removableIDs, o.ID)
		}
	}
	halfway := removableIDs[len(removableIDs)/2]
	release := lockOwners(t, f.store, halfway)
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflows.CleanupScheduleID + "-killed-" + uuid.NewString(), TaskQueue: f.taskQueue,
	}, workflows.CleanupWorkflowName, workflows.CleanupInput{PageSize: 50})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ids := ownedIDs(t, store)
		return len(ids) > 0 && !slices.ContainsFunc(ids, func(id string) bool { return id < halfway && !slices.Contains(keep, id) })
	}, 5*waitLimit, 100*time.Millisecond, "the cleanup never reached %s", halfway)
	w1.kill()
	require.NoError(t, env.c.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "killed mid-way by the test"))
	release()
	left := ownedIDs(t, store)
	assert.Equal(t, removableIDs[len(removableIDs)/2:], slices.DeleteFunc(slices.Clone(left), func(id string) bool { return slices.Contains(keep, id) }),
		"the killed cleanup removed what preceded the locked session, nothing after it")
	t.Logf("the killed cleanup left %d of %d", len(left), len(owned))
	for _, id := range keep {
		assert.Contains(t, left, id, "the killed cleanup kept %s", id)
	}

	// The next scheduled cleanup, on a new worker, finishes.
	w1 = f.startWorker("--retention", retention.String(), "--gc-every", "8760h", "--metrics-addr", "127.0.0.1:0")
	res := triggerCleanup(t, f.taskQueue)
	t.Logf("the scheduled cleanup: %+v", res)
	assert.Equal(t, retention, res.Retention)
	assert.Equal(t, "older-than", res.Source, "the schedule carries the worker's --retention")
	assert.Equal(t, len(left)-len(keep), res.Total().Items, "it removed what the killed one left")
	assert.Equal(t, len(keep), res.Kept)
	assert.ElementsMatch(t, keep, ownedIDs(t, store), "only what the long run owns is left")
	after := footprint(t, f.store, keep)
	assert.Equal(t, before, after, "the store is back to its size before the runs, but for the long run's sessions")
	assert.Equal(t, parentEvents, load(t, store, parentPub.ChildID), "the long run's parent session is intact")
	_, _, err = store.Load(ctx, legacy)
	assert.NoError(t, err, "a session without owners is kept")

	// The new worker's metrics count what it removed (exported once a second).
	waitMetric(t, w1.log, "subflow_cleanup_removed_items_total", "session", float64(res.Removed["session"].Items))
	waitMetric(t, w1.log, "subflow_cleanup_removed_bytes_total", "session", float64(res.Removed["session"].Bytes))

	// The long run, resumed by a new worker of its queue, completes with its whole answer.
	f.startWorkerOn(queue2, "--gc-every", "0")
	out, cancelled := outcome(t, longRun)
	require.False(t, cancelled)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, []session.Block{session.Text("still here after the cleanup")}, out.Result.Output)
	_, events, err := store.Load(ctx, longPub.ChildID)
	require.NoError(t, err)
	assert.Equal(t, session.TypeTurnEnd, events[len(events)-1].Type, "the long run's log is complete")
}

// runStarterFor is runStarter with a longer limit.
func runStarterFor(t *testing.T, limit time.Duration, dir string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd, stdout, stderr := starterCmd(ctx, dir, args...)
	code := exitCode(t, cmd.Run())
	return code, stdout.String(), stderr.String()
}

// startWorkerOn starts a worker process of the test's store serving queue.
func (f *faultEnv) startWorkerOn(queue string, flags ...string) *workerProc {
	saved := f.taskQueue
	defer func() { f.taskQueue = saved }()
	f.taskQueue = queue
	return f.startWorker(flags...)
}

// triggerCleanup runs the cleanup schedule of queue now and returns the result of the run it
// started.
func triggerCleanup(t *testing.T, queue string) workflows.CleanupResult {
	t.Helper()
	ctx := context.Background()
	h := env.c.ScheduleClient().GetHandle(ctx, subflow.CleanupScheduleID(queue))
	require.NoError(t, h.Trigger(ctx, client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP}))
	var wfID, runID string
	require.Eventually(t, func() bool {
		desc, err := h.Describe(ctx)
		if err != nil || len(desc.Info.RecentActions) == 0 {
			return false
		}
		last := desc.Info.RecentActions[len(desc.Info.RecentActions)-1].StartWorkflowResult
		wfID, runID = last.WorkflowID, last.FirstExecutionRunID
		return true
	}, waitLimit, waitTick, "the schedule started no cleanup")
	assert.True(t, strings.HasPrefix(wfID, workflows.CleanupScheduleID), "cleanups run under subflow's ids: %s", wfID)
	var res workflows.CleanupResult
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	require.NoError(t, env.c.GetWorkflow(wctx, wfID, "").Get(wctx, &res), "cleanup %s (first run %s)", wfID, runID)
	return res
}

// ownedIDs lists the ids of the sessions of store that have owners.
func ownedIDs(t *testing.T, store session.Store) []string {
	t.Helper()
	owned, err := store.(session.Retainer).Owned(context.Background(), session.OwnedQuery{Before: time.Now().Add(time.Hour), Limit: 100000})
	require.NoError(t, err)
	ids := make([]string, len(owned))
	for i, o := range owned {
		ids[i] = o.ID
	}
	return ids
}

// load returns the events of a stored session.
func load(t *testing.T, store session.Store, id string) []session.Event {
	t.Helper()
	_, events, err := store.Load(context.Background(), id)
	require.NoError(t, err)
	return events
}

// countWorkflows counts the workflows query lists, waiting for visibility to settle.
func countWorkflows(t *testing.T, query string) int {
	t.Helper()
	var n int
	stable := 0
	require.Eventually(t, func() bool {
		resp, err := env.c.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return false
		}
		if int(resp.GetCount()) == n {
			stable++
		} else {
			n, stable = int(resp.GetCount()), 0
		}
		return stable >= 5
	}, waitLimit, 100*time.Millisecond)
	return n
}

// footprint is what a store holds, but for the sessions in except: for a directory, every
// file's path and size; for Postgres, the rows and the bytes of each table.
func footprint(t *testing.T, spec string, except []string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	if !strings.HasPrefix(spec, "postgres") {
		err := filepath.WalkDir(spec, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(spec, path)
			if slices.Contains(except, strings.Split(rel, string(filepath.Separator))[0]) || d.IsDir() {
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
	conn, err := pgx.Connect(context.Background(), spec)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	for table, key := range map[string]string{
		"subflow_sessions": "id", "subflow_events": "session_id", "subflow_leases": "session_id", "subflow_owners": "session_id",
	} {
		var rows, bytes int64
		// An empty array, not NULL, when nothing is excepted: NULL would leave every row out.
		err := conn.QueryRow(context.Background(), fmt.Sprintf(
			"SELECT count(*), coalesce(sum(octet_length(t::text)), 0) FROM %s t WHERE NOT (%s = ANY($1))", table, key),
			append([]string{}, except...)).Scan(&rows, &bytes)
		require.NoError(t, err)
		out[table+" rows"], out[table+" bytes"] = rows, bytes
	}
	return out
}

// freshPostgresSchema creates a schema dropped when the test ends and returns dsn with its
// search_path pointing at it.
func freshPostgresSchema(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	name := fmt.Sprintf("subflow_retention_%08x", rand.Uint32())
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
			_ = conn.Close(ctx)
		}
	})
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// metricsURL finds the address a worker serves its metrics on in its log.
var metricsURL = regexp.MustCompile(`"url":"(http://[^"]+)"`)

// waitMetric waits until the Prometheus counter name with label kind, as the worker that logs
// to logPath serves it, is want.
func waitMetric(t *testing.T, logPath, name, kind string, want float64) {
	t.Helper()
	value := regexp.MustCompile(`(?m)^` + name + `\{[^}]*kind="` + kind + `"[^}]*\} (\S+)$`)
	last := "absent"
	ok := assert.Eventually(t, func() bool {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return false
		}
		m := metricsURL.FindSubmatch(data)
		if m == nil {
			return false
		}
		resp, err := http.Get(string(m[1]))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return false
		}
		v := value.FindSubmatch(body)
		if v == nil {
			return false
		}
		last = string(v[1])
		got, err := strconv.ParseFloat(last, 64)
		return err == nil && got == want
	}, waitLimit, 100*time.Millisecond)
	require.True(t, ok, "%s{kind=%q} is %s, want %v", name, kind, last, want)
}

// lockOwners holds the lock a cleanup takes to remove session id from the store spec (the
// owners file's flock, or its owner rows in Postgres), until release is called.
func lockOwners(t *testing.T, spec, id string) (release func()) {
	t.Helper()
	ctx := context.Background()
	if !strings.HasPrefix(spec, "postgres") {
		f, err := os.Open(filepath.Join(spec, id, "owners"))
		require.NoError(t, err)
		require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
		return func() { _ = f.Close() }
	}
	conn, err := pgx.Connect(ctx, spec)
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT 1 FROM subflow_owners WHERE session_id = $1 FOR UPDATE", id)
	require.NoError(t, err)
	return func() {
		_ = tx.Rollback(ctx)
		_ = conn.Close(ctx)
	}
}
