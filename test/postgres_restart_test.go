package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestPostgresRestartMidBatch restarts the PostgreSQL server holding the session store while
// a batch runs on two worker processes: appends, lease renewals and lease grants fail for
// the moment the server is down, the drives that failed are retried, and every run of the
// batch completes with its own answer and a clean transcript.
//
// The server is the test's own (initdb in a temporary directory, listening only on a Unix
// socket there, so the restart keeps its address without any port changing hands), from
// Debian's postgresql binaries, which .ci/postgres.sh installs.
func TestPostgresRestartMidBatch(t *testing.T) {
	pg := startPostgres(t)
	t.Parallel()
	f := newFaultEnv(t, pg.dsn)
	store := f.openStore()
	f.startWorker()
	f.startWorker()

	const n = 12
	dir := t.TempDir()
	tasks := make([]workflows.Task, n)
	for i := range tasks {
		tasks[i] = scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, writeSteps(3, 300)...), fmt.Sprintf("task %d", i))
		tasks[i].Cwd = filepath.Join(dir, strconv.Itoa(i))
		require.NoError(t, os.Mkdir(tasks[i].Cwd, 0o755))
	}
	batchID := "batch-" + uuid.NewString()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	run, err := f.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: batchID, TaskQueue: f.taskQueue},
		workflows.BatchWorkflowName, workflows.BatchInput{BatchID: batchID, Tasks: tasks, Total: n, Concurrency: 6, TaskQueue: f.taskQueue})
	require.NoError(t, err)

	// Mid-batch: some children have written files (their drives are appending), none is done.
	require.Eventually(t, func() bool {
		p, err := batchProgress(t, batchID)
		if err != nil || p.Running == 0 {
			return false
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*", "step-*.txt"))
		return len(files) >= 3
	}, 2*waitLimit, waitTick)
	pg.restart(t)

	var sum workflows.BatchSummary
	ctx, cancel = context.WithTimeout(context.Background(), 3*waitLimit)
	defer cancel()
	require.NoError(t, run.Get(ctx, &sum))
	assert.True(t, sum.Completed(), "every run completes: %+v", sum)
	results := readResults(t, f.c, batchID)
	require.Len(t, results, n)
	for i := range n {
		r := results[i]
		assert.Equal(t, subagent.StopCompleted, r.StopReason, "task %d: %+v", i, r)
		assert.Equal(t, "wrote 3 files, one per step", r.Output, "task %d", i)
		tr := checkTranscript(t, store, r.ChildID)
		// The scripted model gives a response whose message could not be stored to no one
		// (its positions are consumed), so the step the outage cut may be missing.
		assert.GreaterOrEqual(t, len(tr.paths), 2, "task %d", i)
	}
}

// postgresServer is a PostgreSQL server of one test.
type postgresServer struct {
	bin, data string
	log       string   // the server's output: never our pipes, which it would hold open
	asUser    []string // the command prefix that runs a program as the server's owner
	dsn       string
}

// startPostgres initialises and starts a server in a new directory, stopped and removed when
// the test ends. It skips the test when Debian's postgresql binaries are missing.
func startPostgres(t *testing.T) *postgresServer {
	t.Helper()
	initdbs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(initdbs) == 0 {
		t.Skip("needs Debian's postgresql package (/usr/lib/postgresql/*/bin): .ci/postgres.sh installs it")
	}
	slices.Sort(initdbs)
	pg := &postgresServer{bin: filepath.Dir(initdbs[len(initdbs)-1])}
	// Not t.TempDir: its parents are private to root, and PostgreSQL refuses to run as root.
	dir, err := os.MkdirTemp("", "subflow-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "the postgresql package creates the postgres user")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		require.NoError(t, os.Chown(dir, uid, gid))
		pg.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	pg.data, pg.log = filepath.Join(dir, "data"), filepath.Join(dir, "log")
	pg.run(t, "initdb", "-D", pg.data, "-A", "trust", "-U", "subflow", "--no-sync")
	pg.run(t, "pg_ctl", "-D", pg.data, "-l", pg.log, "-w", "start",
		"-o", "-c listen_addresses= -k "+dir+" -c fsync=off")
	t.Cleanup(func() { _ = pg.command("pg_ctl", "-D", pg.data, "-m", "immediate", "-w", "stop").Run() })
	pg.dsn = "postgres://subflow@/postgres?sslmode=disable&host=" + url.QueryEscape(dir)
	return pg
}

// command is one of the server's programs, run as its owner.
func (pg *postgresServer) command(prog string, args ...string) *exec.Cmd {
	argv := append(append(slices.Clone(pg.asUser), filepath.Join(pg.bin, prog)), args...)
	return exec.Command(argv[0], argv[1:]...)
}

// run runs one of the server's programs as its owner.
func (pg *postgresServer) run(t *testing.T, prog string, args ...string) {
	t.Helper()
	out, err := pg.command(prog, args...).CombinedOutput()
	require.NoError(t, err, "%s: %s", prog, out)
}

// restart stops the server (fast shutdown: connections are cut, open transactions rolled
// back) and starts it again on the same data and socket.
func (pg *postgresServer) restart(t *testing.T) {
	t.Helper()
	pg.run(t, "pg_ctl", "-D", pg.data, "-l", pg.log, "-m", "fast", "-w", "restart")
}
