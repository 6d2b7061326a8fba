package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/devserver"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
	"github.com/subflow-dev/subflow/workflows/replaytest"
)

// waitLimit only keeps a broken test from hanging; no test asserts a duration.
const waitLimit = 60 * time.Second

// recordEnv, set to 1, makes the tests record their histories into workflows/testdata.
const recordEnv = "SUBFLOW_RECORD_HISTORIES"

// env is what every test of the package shares: one server, one worker, one starter binary.
var env struct {
	srv         *devserver.Server
	c           client.Client
	taskQueue   string
	sessionRoot string
	starter     string // path of the built starter binary
	tmp         string // the package's temporary directory, removed after the tests
}

// parallelTests is how many of the package's parallel tests run at once unless -parallel
// says otherwise. They spend most of their time waiting (for a handshake's timeout, for a
// killed worker's replacement, for a heartbeat timeout) on processes and queues of their own,
// not on CPU, so more of them than the 2 cores go test allows by default finish sooner.
const parallelTests = 4

func TestMain(m *testing.M) {
	// The test binary is also the sdk child command: as such it serves the child runtime.
	app.MaybeRunChildRuntime()
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", fmt.Sprint(max(parallelTests, runtime.GOMAXPROCS(0)))); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: set -parallel:", err)
			os.Exit(1)
		}
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "subflow-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	stop, err := setUp(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: set up:", err)
		if stop != nil {
			stop()
		}
		return 1
	}
	defer stop()
	return m.Run()
}

// setUp builds the starter, starts the server and the worker. stop undoes what was done,
// also after a failure.
func setUp(tmp string) (stop func(), err error) {
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	ctx := context.Background()

	env.tmp = tmp
	env.starter = filepath.Join(tmp, "starter")
	build := exec.Command("go", "build", "-o", env.starter, "github.com/subflow-dev/subflow/starter")
	if out, err := build.CombinedOutput(); err != nil {
		return stop, fmt.Errorf("build starter: %v\n%s", err, out)
	}

	env.srv, err = devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI, LogLevel: "error"})
	if err != nil {
		return stop, err
	}
	undo = append(undo, func() { _ = env.srv.Stop() })
	// The worker below logs to the server's log: a cancellation, which these tests cause on
	// purpose, at info.
	copts := env.srv.ClientOptions()
	copts.Logger = activities.QuietCancellations(copts.Logger)
	env.c, err = client.DialContext(ctx, copts)
	if err != nil {
		return stop, err
	}
	undo = append(undo, env.c.Close)

	exe, err := os.Executable()
	if err != nil {
		return stop, err
	}
	env.taskQueue = workflows.TaskQueue
	env.sessionRoot = filepath.Join(tmp, "sessions")
	w, cleanup, err := app.New(env.c, app.Options{
		TaskQueue:   env.taskQueue,
		SessionRoot: env.sessionRoot,
		SDKCommand:  exe,
		SDKArgs:     []string{app.ChildRuntimeArg},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return stop, err
	}
	undo = append(undo, func() { _ = cleanup() })
	if err := w.Start(); err != nil {
		return stop, err
	}
	undo = append(undo, w.Stop)
	return stop, nil
}

// script writes a scripted-model script with responses (JSON objects) into dir and returns
// its absolute path.
func script(t testing.TB, dir string, responses ...string) string {
	t.Helper()
	path := filepath.Join(dir, uuid.NewString()+".json")
	body := `{"responses": [` + strings.Join(responses, ",") + "]}"
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	return path
}

// rootInput is a run of provider with a new root session in cwd, routed to scriptPath.
func rootInput(provider, cwd, scriptPath, prompt string) workflows.StartInput {
	route := session.Route{Provider: model.ProviderScripted, Model: scriptPath}
	return workflows.StartInput{
		Provider: provider,
		Request: subagent.Request{
			Prompt:       []session.Block{session.Text(prompt)},
			Parent:       subagent.ParentRef{Cwd: cwd},
			AgentOptions: route,
		},
		Root: &workflows.RootSession{Cwd: cwd, Route: route},
	}
}

// start starts a run and returns once its child is published.
func start(t testing.TB, in workflows.StartInput) (workflows.Published, client.WorkflowRun) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	pub, run, err := subflow.Start(ctx, env.c, subflow.StartOptions{TaskQueue: env.taskQueue, Input: in})
	require.NoError(t, err)
	require.NotEmpty(t, pub.ChildID)
	return pub, run
}

// outcome waits for a run's outcome; cancelled is true when the run ended Canceled (the
// outcome is then its details).
func outcome(t testing.TB, run client.WorkflowRun) (out workflows.Outcome, cancelled bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	err := run.Get(ctx, &out)
	if err == nil {
		return out, false
	}
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled), "run %s failed: %v", run.GetID(), err)
	require.True(t, canceled.HasDetails(), "a cancelled published run carries its outcome")
	require.NoError(t, canceled.Details(&out))
	return out, true
}

// record writes the history of a finished run to workflows/testdata/<name>.json when
// SUBFLOW_RECORD_HISTORIES=1.
func record(t testing.TB, run client.WorkflowRun, name string) {
	t.Helper()
	if os.Getenv(recordEnv) != "1" {
		return
	}
	path := filepath.Join("..", "workflows", "testdata", name+".json")
	require.NoError(t, replaytest.WriteFile(context.Background(), env.c, run.GetID(), run.GetRunID(), path))
	t.Logf("recorded %s", path)
}

// waitStreaming polls the status of a run until its live progress shows streamed text, and
// returns that status.
func waitStreaming(t testing.TB, run client.WorkflowRun) workflows.Status {
	t.Helper()
	var st workflows.Status
	require.Eventually(t, func() bool {
		var err error
		st, err = subflow.Describe(context.Background(), env.c, run.GetID(), run.GetRunID())
		return err == nil && st.Progress != nil && st.Progress.Tail != ""
	}, waitLimit, 50*time.Millisecond, "run %s never streamed", run.GetID())
	return st
}
