package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/session/storeopen"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// The fault tests run the worker program as users run it, in processes they can SIGKILL:
// each test has its own task queue (so the package's in-process worker never takes its
// tasks) and its own session store, shared by the test's worker processes.

var workerBin = sync.OnceValues(func() (string, error) {
	path := filepath.Join(env.tmp, "worker")
	out, err := exec.Command("go", "build", "-o", path, "github.com/subflow-dev/subflow/worker").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build worker: %v\n%s", err, out)
	}
	return path, nil
})

// faultEnv is one fault test's task queue, session store and worker processes.
type faultEnv struct {
	t         testing.TB
	c         client.Client
	addr      string // TEMPORAL_ADDRESS
	namespace string
	taskQueue string
	store     string // session store spec: a directory or a postgres:// URL
	logs      string // directory of the workers' logs
	workDir   string // working directory of the workers; empty means the test's
	extraArgs []string
	extraEnv  []string
	n         int
}

// newFaultEnv prepares a fault test on the package's server with a file session store (or
// the Postgres store when storeSpec is a URL).
func newFaultEnv(t testing.TB, storeSpec string) *faultEnv {
	t.Helper()
	if storeSpec == "" {
		storeSpec = filepath.Join(t.TempDir(), "sessions")
	}
	return &faultEnv{
		t: t, c: env.c, addr: env.srv.FrontendAddr(), namespace: env.srv.Namespace(),
		taskQueue: "faults-" + uuid.NewString(), store: storeSpec, logs: t.TempDir(),
	}
}

// workerProc is a running worker process.
type workerProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startWorker starts a worker process serving the test's task queue, with extra flags.
func (f *faultEnv) startWorker(flags ...string) *workerProc { return f.startWorkerVia(nil, flags...) }

// startWorkerVia starts a worker process through the command prefix (say, `ip netns exec NS`,
// which execs the worker in place, so the process is the worker), with extra flags.
func (f *faultEnv) startWorkerVia(prefix []string, flags ...string) *workerProc {
	t := f.t
	t.Helper()
	bin, err := workerBin()
	require.NoError(t, err)
	f.n++
	logPath := filepath.Join(f.logs, fmt.Sprintf("worker-%d.log", f.n))
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	defer logFile.Close()
	args := append(append(append(append([]string{}, prefix...), bin, "--task-queue", f.taskQueue, "--log-level", "info"), flags...), f.extraArgs...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = f.workDir
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+f.addr,
		"TEMPORAL_NAMESPACE="+f.namespace,
		app.EnvSessionStore+"="+f.store,
		app.EnvSessionRoot+"=",
	)
	cmd.Env = append(cmd.Env, f.extraEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	w := &workerProc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		w.kill()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("%s:\n%s", logPath, lastLines(data, 40))
		}
	})
	return w
}

// kill SIGKILLs the worker and waits until it is gone.
func (w *workerProc) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.done
}

func (w *workerProc) pid() int { return w.cmd.Process.Pid }

func lastLines(data []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// start starts a run on the test's task queue and returns once its child is published.
func (f *faultEnv) start(in workflows.StartInput) (workflows.Published, client.WorkflowRun) {
	t := f.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	pub, run, err := subflow.Start(ctx, f.c, subflow.StartOptions{TaskQueue: f.taskQueue, Input: in})
	require.NoError(t, err)
	return pub, run
}

// onQueue is the visibility query clause of the runs of task queue q: those started on q
// and on its interactive lane, where subflow.Start starts an interactive run once the
// workers poll it.
func onQueue(q string) string {
	return fmt.Sprintf("TaskQueue IN (%q, %q)", q, workflows.InteractiveQueue(q))
}

// openStore opens the test's session store from the test process, as a second store on the
// same data.
func (f *faultEnv) openStore() storeopen.Store {
	t := f.t
	t.Helper()
	s, err := storeopen.Open(context.Background(), f.store)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// enumsState is the state of a pending activity.
type enumsState = enumspb.PendingActivityState

// waitTick is the polling interval of the fault tests.
const waitTick = 10 * time.Millisecond

// pendingActivity polls the run until fn accepts one of its pending activities of the given
// type, and returns it.
func pendingActivity(t testing.TB, c client.Client, run client.WorkflowRun, name string,
	fn func(state enumspb.PendingActivityState, p workflows.Progress) bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		desc, err := c.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
		if err != nil {
			return false
		}
		for _, pa := range desc.GetPendingActivities() {
			if pa.GetActivityType().GetName() != name {
				continue
			}
			var p workflows.Progress
			if pa.GetHeartbeatDetails() != nil {
				_ = converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p)
			}
			if fn(pa.GetState(), p) {
				return true
			}
		}
		return false
	}, 2*waitLimit, 10*time.Millisecond, "run %s: no pending %s activity as expected", run.GetID(), name)
}

// history returns the events of a run.
func history(t testing.TB, c client.Client, run client.WorkflowRun) []*historypb.HistoryEvent {
	t.Helper()
	var events []*historypb.HistoryEvent
	iter := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false,
		enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		events = append(events, ev)
	}
	return events
}

// activityAttempts returns, per activity type, the attempt of its last ActivityTaskStarted
// event and the identities of the workers that started it.
func activityAttempts(events []*historypb.HistoryEvent) (attempts map[string]int32, workers map[string][]string) {
	attempts, workers = map[string]int32{}, map[string][]string{}
	scheduled := map[int64]string{}
	for _, ev := range events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			name := scheduled[a.GetScheduledEventId()]
			attempts[name] = a.GetAttempt()
			workers[name] = append(workers[name], a.GetIdentity())
		}
	}
	return attempts, workers
}

// transcript is what checkTranscript found in a child's log.
type transcript struct {
	events   []session.Event
	messages [][]session.Block // assistant messages' content, in order
	results  []session.ToolResultData
	end      session.EndReason
	paths    map[string]string // tool-call id → write_file path
}

// checkTranscript loads a finished child and checks that its log has no duplicated or torn
// events: dense seqs, one splice, one turn/start and one turn/end (the last event), every
// step started once, every assistant message and every tool result recorded once, and a
// result for every tool call.
func checkTranscript(t testing.TB, s session.Store, childID string) transcript {
	t.Helper()
	_, events, err := s.Load(context.Background(), childID)
	require.NoError(t, err)
	tr := transcript{events: events, paths: map[string]string{}}
	counts := map[string]int{}
	steps := map[session.StepData]bool{}
	msgIDs := map[string]bool{}
	resultIDs := map[string]bool{}
	var calls []string
	for i, ev := range events {
		require.EqualValues(t, i, ev.Seq, "seqs are dense")
		counts[ev.Type]++
		switch ev.Type {
		case session.TypeStepStart:
			var sd session.StepData
			require.NoError(t, ev.Decode(&sd))
			assert.False(t, steps[sd], "step %+v started twice", sd)
			steps[sd] = true
		case session.TypeAssistantMessage:
			var md session.AssistantMessageData
			require.NoError(t, ev.Decode(&md))
			assert.False(t, msgIDs[md.Message.ID], "assistant message %s recorded twice", md.Message.ID)
			msgIDs[md.Message.ID] = true
			tr.messages = append(tr.messages, md.Message.Content)
			for _, b := range md.Message.Content {
				if b.Type == session.BlockToolCall {
					calls = append(calls, b.ID)
					var in struct{ Path string }
					_ = json.Unmarshal(b.Input, &in)
					tr.paths[b.ID] = in.Path
				}
			}
		case session.TypeToolResult:
			var rd session.ToolResultData
			require.NoError(t, ev.Decode(&rd))
			assert.False(t, resultIDs[rd.CallID], "tool call %s has two results", rd.CallID)
			resultIDs[rd.CallID] = true
			tr.results = append(tr.results, rd)
		case session.TypeTurnEnd:
			var ed session.TurnEndData
			require.NoError(t, ev.Decode(&ed))
			tr.end = ed.Reason
		}
	}
	assert.Equal(t, 1, counts[session.TypeInboxSpliced], "one splice")
	assert.Equal(t, 1, counts[session.TypeTurnStart], "one turn/start")
	assert.Equal(t, 1, counts[session.TypeTurnEnd], "one turn/end")
	if assert.NotEmpty(t, events) {
		assert.Equal(t, session.TypeTurnEnd, events[len(events)-1].Type, "the turn/end is the last event")
	}
	for _, id := range calls {
		assert.True(t, resultIDs[id], "tool call %s has no result", id)
	}
	return tr
}

// storedResults returns the tool-call ids whose result the child's log holds now.
func storedResults(t testing.TB, s session.Store, childID string) (ids map[string]bool, ended bool) {
	t.Helper()
	_, events, err := s.Load(context.Background(), childID)
	require.NoError(t, err)
	ids = map[string]bool{}
	for _, ev := range events {
		switch ev.Type {
		case session.TypeToolResult:
			var rd session.ToolResultData
			require.NoError(t, ev.Decode(&rd))
			ids[rd.CallID] = true
		case session.TypeTurnEnd:
			ended = true
		}
	}
	return ids, ended
}

// processesOf returns the pids of ppid's child processes whose command line holds arg, and
// that are not zombies (a zombie is dead; only its parent's wait is missing).
func processesOf(t testing.TB, ppid int, arg string) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(t, err)
	var pids []int
	for _, stat := range stats {
		data, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(fields) < 2 || fields[0] == "Z" || fields[1] != strconv.Itoa(ppid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(filepath.Dir(stat), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(arg)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(stat)))
		pids = append(pids, pid)
	}
	return pids
}

// alive reports whether pid is a process that has not exited (zombies have).
func alive(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// openFileStore opens a second FileStore on a session root, for the test to read.
func openFileStore(t testing.TB, root string) *filestore.Store {
	t.Helper()
	s, err := filestore.New(root)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}
