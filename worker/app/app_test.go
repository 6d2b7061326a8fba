package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/subflow-dev/subflow/harness/session/storeopen"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

func TestDefaultsComeFromTheEnvironment(t *testing.T) {
	root := t.TempDir()
	t.Setenv(EnvSessionRoot, root)
	t.Setenv(EnvSessionStore, "")
	opts, err := Options{}.withDefaults()
	require.NoError(t, err)

	exe, err := os.Executable()
	require.NoError(t, err)
	assert.Equal(t, workflows.TaskQueue, opts.TaskQueue)
	assert.Equal(t, root, opts.SessionStore, "the file store under $SUBFLOW_SESSION_ROOT")
	assert.Equal(t, exe, opts.SDKCommand, "the default child is this executable")
	assert.Equal(t, []string{ChildRuntimeArg}, opts.SDKArgs)
	assert.Equal(t, DefaultStopTimeout, opts.StopTimeout)
}

// TestSessionStoreWinsOverSessionRoot pins the one precedence of the worker and starter dev:
// the --session-root option, then $SUBFLOW_SESSION_STORE, then $SUBFLOW_SESSION_ROOT.
func TestSessionStoreWinsOverSessionRoot(t *testing.T) {
	store, root := t.TempDir(), t.TempDir()
	t.Setenv(EnvSessionRoot, root)
	t.Setenv(EnvSessionStore, store)
	opts, err := Options{SDKCommand: "child"}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, store, opts.SessionStore)

	explicit := t.TempDir()
	opts, err = Options{SessionRoot: explicit, SDKCommand: "child"}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, explicit, opts.SessionStore, "an explicit option wins over the environment")
}

func TestDefaultSessionRootIsPerUser(t *testing.T) {
	t.Setenv(EnvSessionRoot, "")
	t.Setenv("XDG_DATA_HOME", "/data/home")
	root, err := DefaultSessionRoot()
	require.NoError(t, err)
	assert.Equal(t, "/data/home/subflow/sessions", root)

	home := t.TempDir()
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", home)
	root, err = DefaultSessionRoot()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(home, ".local", "share", "subflow", "sessions"), root)
}

func TestExplicitOptionsWin(t *testing.T) {
	t.Setenv(EnvSessionRoot, "/not/this")
	opts, err := Options{
		TaskQueue: "q", SessionRoot: "/sessions", SDKCommand: "/bin/agent", SDKArgs: []string{"-v"},
	}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, "q", opts.TaskQueue)
	assert.Equal(t, "/sessions", opts.SessionStore)
	assert.Equal(t, "/bin/agent", opts.SDKCommand)
	assert.Equal(t, []string{"-v"}, opts.SDKArgs)

	_, err = Options{SDKArgs: []string{"-v"}}.withDefaults()
	assert.ErrorContains(t, err, "without an sdk command")
}

func TestDefaultSDKCommandPassesThePresetsFile(t *testing.T) {
	exe, args, err := DefaultSDKCommand("presets.json")
	require.NoError(t, err)
	self, _ := os.Executable()
	wd, _ := os.Getwd()
	assert.Equal(t, self, exe)
	assert.Equal(t, []string{ChildRuntimeArg, "--config", filepath.Join(wd, "presets.json")}, args)
}

// TestNewBuildsAWorkerOverTheFileStore: New's worker takes workflows and activities of the
// caller's own beside subflow's, as any worker.Worker does, on its queues and their
// interactive lanes alike.
func TestNewBuildsAWorkerOverTheFileStore(t *testing.T) {
	root := filepath.Join(t.TempDir(), "nested", "sessions")
	c, err := client.NewLazyClient(client.Options{})
	require.NoError(t, err)
	defer c.Close()
	w, cleanup, err := New(c, Options{SessionRoot: root})
	require.NoError(t, err)
	require.NotNil(t, w)
	assert.DirExists(t, root)
	assert.NotPanics(t, func() {
		w.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil }, workflow.RegisterOptions{Name: "Mine"})
		w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "MyActivity"})
	})
	require.NoError(t, cleanup())
}

func TestSessionStoreEnvironmentWinsOverTheRootEnvironment(t *testing.T) {
	t.Setenv(EnvSessionRoot, "/root/from/env")
	t.Setenv(EnvSessionStore, "postgres://u:secret@db/subflow")
	opts, err := Options{}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, "postgres://u:secret@db/subflow", opts.SessionStore)
	assert.Equal(t, "postgres://u:xxxxx@db/subflow", storeopen.Describe(opts.SessionStore), "no password in logs")

	opts, err = Options{SessionRoot: "/explicit"}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, "/explicit", opts.SessionStore, "an explicit root wins over the environment")
}

func TestTemporalLoggerWritesKeyValuesAsFields(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := TemporalLogger(zap.New(core))
	l.Info("Started Worker", "Namespace", "default", "TaskQueue", "subflow", 7)
	l.(log.WithLogger).With("WorkflowID", "w1").Warn("Activity error.", "Attempt", 2)

	entries := logs.All()
	require.Len(t, entries, 2)
	assert.Equal(t, "Started Worker", entries[0].Message)
	assert.Equal(t, map[string]any{"Namespace": "default", "TaskQueue": "subflow", "extra": int64(7)},
		entries[0].ContextMap())
	assert.Equal(t, zapcore.WarnLevel, entries[1].Level)
	assert.Equal(t, map[string]any{"WorkflowID": "w1", "Attempt": int64(2)}, entries[1].ContextMap())
}

// TestSDKConfigHandsOverModelVariablesAndChildEnv: sdk children get an allowlisted
// environment, so the worker names what they need: the model variables explicitly, and the
// operator's --child-env names.
func TestSDKConfigHandsOverModelVariablesAndChildEnv(t *testing.T) {
	t.Setenv("DEEPSEEK_API_KEY", "k")
	t.Setenv("DEEPSEEK_BASE_URL", "http://127.0.0.1:1/v1")
	cfg := sdkConfig(Options{SDKCommand: "/bin/agent", ChildEnv: []string{"MY_VAR"}})
	assert.Equal(t, "k", cfg.Env["DEEPSEEK_API_KEY"])
	assert.Equal(t, "http://127.0.0.1:1/v1", cfg.Env["DEEPSEEK_BASE_URL"])
	assert.Equal(t, []string{"MY_VAR"}, cfg.ChildEnv)
}

func TestNewRejectsBadSlotsAndSubagentSettings(t *testing.T) {
	c, err := client.NewLazyClient(client.Options{})
	require.NoError(t, err)
	defer c.Close()
	root := filepath.Join(t.TempDir(), "sessions")
	_, _, err = New(c, Options{SessionRoot: root, MaxConcurrentActivities: -1})
	assert.ErrorContains(t, err, "max concurrent activities -1 must not be negative")
	_, _, err = New(c, Options{SessionRoot: root, InteractiveActivities: -1})
	assert.ErrorContains(t, err, "interactive activities -1 must not be negative")
	for _, n := range []int{1, -3} {
		_, _, err = New(c, Options{SessionRoot: root, Pollers: n})
		assert.ErrorContains(t, err, fmt.Sprintf("app: pollers %d: want 2 or more", n))
	}
	_, _, err = New(c, Options{SessionRoot: root, SubagentProvider: "nope"})
	assert.ErrorContains(t, err, `no subagent provider registered for "nope"`)
	two, err := subagent.MaxDepthLimit(2)
	require.NoError(t, err)
	_, _, err = New(c, Options{SessionRoot: root, SubagentProvider: "sdk", SubagentMaxDepth: two})
	assert.Error(t, err, "a numeric cap needs a provider with depthLimit (contract R-9)")
	_, _, err = New(c, Options{SessionRoot: root, YieldActivities: -2})
	assert.ErrorContains(t, err, "yield activities -2 must not be negative")
	_, _, err = New(c, Options{SessionRoot: root, MaxConcurrentActivities: 2, YieldActivities: 2})
	assert.ErrorContains(t, err, "yield activities 2 must be fewer than the worker's 2 activity slots")
	_, _, err = New(c, Options{SessionRoot: root, YieldActivities: 1000})
	assert.ErrorContains(t, err, "yield activities 1000 must be fewer than the worker's 1000 activity slots")
	w, cleanup, err := New(c, Options{SessionRoot: root, MaxConcurrentActivities: 2, SubagentMaxDepth: two})
	require.NoError(t, err)
	require.NotNil(t, w)
	require.NoError(t, cleanup())
	// The yielding worker's slots come from tuners, which the SDK refuses beside a slot count.
	w, cleanup, err = New(c, Options{SessionRoot: root, MaxConcurrentActivities: 2, InteractiveActivities: 3, YieldActivities: 1})
	require.NoError(t, err)
	require.NotNil(t, w)
	require.NoError(t, cleanup())
}

// A session store the worker cannot open is named in its error and its log lines without a
// password, whichever way the password is given (docs/deployment.md): in the URL's userinfo,
// as a query parameter, or as the key of a key/value connection string, which is read as a
// Postgres database and never created as a directory.
func TestSessionStoreSecretsStayOutOfErrorsAndLogs(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	core, logs := observer.New(zapcore.DebugLevel)
	c, err := client.NewLazyClient(client.Options{})
	require.NoError(t, err)
	defer c.Close()
	for _, spec := range []string{
		"postgres://u:pw-userinfo@127.0.0.1:1/db?password=pw-query&connect_timeout=2",
		"postgres://u:pw-userinfo@127.0.0.1:notaport/db?password=pw-query",
		"postgresql://127.0.0.1:1/db?sslmode=disable&PassWord=pw-query&connect_timeout=2",
		"host=127.0.0.1 port=1 user=u password=pw-kv dbname=db connect_timeout=2",
		"host=127.0.0.1 port=1 password='pw kv quoted' dbname=db connect_timeout=2",
		"host=127.0.0.1 port=notaport password=pw-kv",
	} {
		_, _, err := New(c, Options{SessionStore: spec, Logger: zap.New(core)})
		require.Error(t, err, spec)
		assert.Contains(t, err.Error(), "pgstore", "%s is a Postgres database, not a directory", spec)
		for _, secret := range []string{"pw-userinfo", "pw-query", "pw-kv", "pw kv quoted"} {
			assert.NotContains(t, err.Error(), secret, spec)
			for _, e := range logs.All() {
				assert.NotContains(t, fmt.Sprint(e.Message, e.ContextMap()), secret, spec)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no connection string became a directory")
}

// The sdk runtime's session root, wherever the child keeps it, is among the directories the
// children's file tools refuse (docs/sdk-children.md).
func TestSDKSessionRootsAreProtected(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, "state"))
	roots := sdkSessionRoots(Options{SDKArgs: []string{"child-runtime", "--session-root", "/srv/sdk", "--session-root=/srv/sdk2"}})
	assert.Subset(t, roots, []string{"/srv/sdk", "/srv/sdk2",
		filepath.Join(home, "state", "subflow", "sdk-sessions"),
		filepath.Join(home, ".local", "state", "subflow", "sdk-sessions")})
}

func TestBuildIDComesFromTheBuild(t *testing.T) {
	assert.Equal(t, "v1.0.0", BuildInfo{Version: "v1.0.0", Revision: "0123456789abcdef"}.BuildID(), "a release's module version")
	assert.Equal(t, "0123456789ab", BuildInfo{Version: "(devel)", Revision: "0123456789abcdef"}.BuildID(), "a checkout's revision")
	assert.Equal(t, "0123456789ab-modified", BuildInfo{Version: "(devel)", Revision: "0123456789abcdef", Modified: true}.BuildID())
	assert.Empty(t, BuildInfo{Version: "(devel)"}.BuildID(), "nothing tells this build from another")
}

// TestDeploymentOptions: a deployment name (flag or environment) makes a versioned worker
// whose workflows default to Pinned; without a build id to use, New refuses up front.
func TestDeploymentOptions(t *testing.T) {
	t.Setenv(EnvDeploymentName, "")
	t.Setenv(EnvBuildID, "")
	opts, err := Options{SDKCommand: "child", SessionRoot: t.TempDir()}.withDefaults()
	require.NoError(t, err)
	assert.False(t, deploymentOptions(opts).UseVersioning, "no deployment name: unversioned")

	t.Setenv(EnvDeploymentName, "subflow")
	t.Setenv(EnvBuildID, "b42")
	opts, err = Options{SDKCommand: "child", SessionRoot: t.TempDir()}.withDefaults()
	require.NoError(t, err)
	d := deploymentOptions(opts)
	assert.True(t, d.UseVersioning)
	assert.Equal(t, "subflow", d.Version.DeploymentName)
	assert.Equal(t, "b42", d.Version.BuildID)
	assert.Equal(t, workflow.VersioningBehaviorPinned, d.DefaultVersioningBehavior)

	opts, err = Options{SDKCommand: "child", SessionRoot: t.TempDir(), BuildID: "flag"}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, "flag", opts.BuildID, "the flag wins over the environment")

	_, err = Options{SDKCommand: "child", SessionRoot: t.TempDir(), DeploymentName: "sub.flow"}.withDefaults()
	assert.ErrorContains(t, err, `deployment name "sub.flow" must not contain "."`)

	if ReadBuildInfo().BuildID() == "" {
		t.Setenv(EnvBuildID, "")
		_, err = Options{SDKCommand: "child", SessionRoot: t.TempDir()}.withDefaults()
		assert.ErrorContains(t, err, "deployment subflow needs a build id")
		assert.ErrorContains(t, err, "--build-id or $SUBFLOW_BUILD_ID")
	}
}

// TestReplayGateOnRecordedHistories: the shipped workflows replay every recorded history;
// a build whose StartSubagent records one more command fails, naming each history it breaks.
func TestReplayGateOnRecordedHistories(t *testing.T) {
	dir := filepath.Join("..", "..", "workflows", "testdata")
	rep, err := Replay(context.Background(), ReplayOptions{Dirs: []string{dir}})
	require.NoError(t, err)
	assert.Empty(t, rep.Failed)
	assert.NotEmpty(t, rep.Replayed)

	other := func(r worker.WorkflowRegistry) {
		workflows.Register(renamed{r, workflows.WorkflowName, func(ctx workflow.Context, in workflows.StartInput) (workflows.Outcome, error) {
			_ = workflow.Sleep(ctx, time.Millisecond)
			return workflows.StartSubagent(ctx, in)
		}})
	}
	rep, err = Replay(context.Background(), ReplayOptions{Dirs: []string{dir}, Workflows: other})
	require.NoError(t, err)
	var names []string
	for _, f := range rep.Failed {
		names = append(names, f.Run)
	}
	assert.Contains(t, names, filepath.Join(dir, "spawn-completed.json"))
	assert.NotContains(t, names, filepath.Join(dir, "batch-completed.json"), "the batch is unchanged")

	_, err = Replay(context.Background(), ReplayOptions{Dirs: []string{t.TempDir()}})
	assert.ErrorContains(t, err, "no recorded history")
}

// renamed registers fn in place of the workflow registered as name.
type renamed struct {
	worker.WorkflowRegistry
	name string
	fn   any
}

func (r renamed) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	if o.Name == r.name {
		w = r.fn
	}
	r.WorkflowRegistry.RegisterWorkflowWithOptions(w, o)
}

// queueWorker stands for one queue's Temporal worker in a multiWorker: it starts and counts
// its stops.
type queueWorker struct {
	worker.Worker
	stops atomic.Int32
}

func (q *queueWorker) Start() error { return nil }
func (q *queueWorker) Stop()        { q.stops.Add(1) }

// TestFatalErrorOfOneQueueStopsTheWorker: when the SDK gives up on one queue's worker (the
// server refused its polls for two minutes), the workers of the other queues stop too and
// Run returns the error, naming the queue and the identity's length, so that the worker
// program exits instead of serving part of its queues.
func TestFatalErrorOfOneQueueStopsTheWorker(t *testing.T) {
	queue, lane := &queueWorker{}, &queueWorker{}
	m := &multiWorker{ws: []worker.Worker{queue, lane}, lanes: []worker.Worker{lane}, stopped: make(chan struct{})}
	o := m.stopOnFatal(worker.Options{Identity: "1@host@ workspace-roots=[]"}, "interactive:q")
	errc := make(chan error, 1)
	go func() { errc <- m.Run(nil) }()
	o.OnFatalError(serviceerror.NewInvalidArgument("Identity length exceeds limit."))
	o.OnFatalError(errors.New("a later error"))
	select {
	case err := <-errc:
		require.Error(t, err)
		assert.Equal(t, "app: the worker of task queue interactive:q stopped: the server refused it: Identity length exceeds limit. "+
			"(its identity is 26 bytes, with the workspace roots it serves; a server refuses an identity or a task queue name longer than its limit.maxIDLength)",
			err.Error())
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after a fatal error")
	}
	assert.Positive(t, queue.stops.Load(), "the other queue's worker stopped")
	assert.Positive(t, lane.stops.Load())
}

// TestFatalErrorNotAboutNamesHasNoHint: a fatal error the server gives for something else than
// a refused argument (here a namespace deleted under the worker) is told as it is, without the
// hint about names over the server's limit.
func TestFatalErrorNotAboutNamesHasNoHint(t *testing.T) {
	m := &multiWorker{stopped: make(chan struct{})}
	o := m.stopOnFatal(worker.Options{Identity: "1@host@"}, "q")
	o.OnFatalError(serviceerror.NewNamespaceNotFound("default"))
	<-m.stopped
	require.EqualError(t, m.fatalErr(), "app: the worker of task queue q stopped: the server refused it: Namespace default is not found.")
}
