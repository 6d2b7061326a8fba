package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// waitLimit only keeps a broken benchmark from hanging.
const waitLimit = 2 * time.Minute

// slowScript writes a script whose one response streams 200 chunks over a minute (one chunk
// every 300 ms), so a run is mid-stream for as long as a benchmark needs, and returns its
// path.
func slowScript(b *testing.B, dir string) string {
	b.Helper()
	text := strings.Repeat("lorem ipsum ", 100)
	path := filepath.Join(dir, "slow.json")
	body := fmt.Sprintf(`{"responses": [{"text": %q, "chunks": 200, "delayMs": 60000}]}`, text)
	require.NoError(b, os.WriteFile(path, []byte(body), 0o644))
	return path
}

// rootInput is a run of provider with a new root session in cwd, routed to scriptPath.
func rootInput(provider, cwd, scriptPath string) workflows.StartInput {
	route := session.Route{Provider: model.ProviderScripted, Model: scriptPath}
	return workflows.StartInput{
		Provider: provider,
		Request: subagent.Request{
			Prompt:       []session.Block{session.Text("stream slowly")},
			Parent:       subagent.ParentRef{Cwd: cwd},
			AgentOptions: route,
		},
		Root: &workflows.RootSession{Cwd: cwd, Route: route},
	}
}

// slowRun is a started run whose child streams slowly.
type slowRun struct {
	pub workflows.Published
	run client.WorkflowRun
	dir string // the run's own cwd, also the sdk child's working directory
}

// startSlow starts a slow run of provider on taskQueue in a new directory under parent and
// returns once it is published.
func startSlow(ctx context.Context, provider, taskQueue, parent, scriptPath string) (slowRun, error) {
	dir, err := os.MkdirTemp(parent, "run-")
	if err != nil {
		return slowRun{}, err
	}
	pub, run, err := subflow.Start(ctx, env.c, subflow.StartOptions{
		TaskQueue: taskQueue, Input: rootInput(provider, dir, scriptPath)})
	if err != nil {
		return slowRun{}, err
	}
	return slowRun{pub: pub, run: run, dir: dir}, nil
}

// streaming reports whether the run's Drive (or RunSDKChild) activity has heartbeaten a
// progress that shows streamed text, i.e. the run is driving mid-stream. It reads the
// pending activities only, as subflow.Describe does, but without the status query: a
// query is a workflow task, and polling hundreds of runs with queries would load the
// worker being measured.
func streaming(ctx context.Context, r slowRun) (bool, error) {
	desc, err := env.c.DescribeWorkflowExecution(ctx, r.run.GetID(), r.run.GetRunID())
	if err != nil {
		return false, fmt.Errorf("describe %s: %w", r.run.GetID(), err)
	}
	for _, pa := range desc.GetPendingActivities() {
		name := pa.GetActivityType().GetName()
		if (name != workflows.ActivityDrive && name != workflows.ActivityRunSDKChild) || pa.GetHeartbeatDetails() == nil {
			continue
		}
		var p workflows.Progress
		if err := converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p); err != nil {
			return false, fmt.Errorf("decode progress of %s: %w", r.run.GetID(), err)
		}
		return p.Tail != "", nil
	}
	return false, nil
}

// waitStreaming polls the run until it streams.
func waitStreaming(ctx context.Context, r slowRun) error {
	for {
		ok, err := streaming(ctx, r)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("run %s never streamed: %w", r.run.GetID(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitCancelled waits for the run's outcome and checks that it ended Canceled with an
// aborted result.
func waitCancelled(ctx context.Context, r slowRun) error {
	err := r.run.Get(ctx, nil)
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		return fmt.Errorf("run %s: want Canceled, got %v", r.run.GetID(), err)
	}
	var out workflows.Outcome
	if err := canceled.Details(&out); err != nil {
		return fmt.Errorf("run %s: cancel details: %w", r.run.GetID(), err)
	}
	if out.Result.StopReason != subagent.StopAborted {
		return fmt.Errorf("run %s: stop reason %q, want %q", r.run.GetID(), out.Result.StopReason, subagent.StopAborted)
	}
	return nil
}

// childRuntime returns the pid of the sdk child runtime that this process started in dir:
// its parent is this process, its command line holds app.ChildRuntimeArg and its working
// directory is dir. It returns 0 when there is none.
func childRuntime(dir string) int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range stats {
		data, err := os.ReadFile(stat)
		if err != nil {
			continue // the process ended meanwhile
		}
		if _, ppid := procState(data); ppid != os.Getpid() {
			continue
		}
		proc := filepath.Dir(stat)
		cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(app.ChildRuntimeArg)) {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join(proc, "cwd")); err != nil || cwd != dir {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(proc))
		return pid
	}
	return 0
}

// procState parses /proc/<pid>/stat: "pid (comm) state ppid …", where comm may hold spaces
// and parentheses.
func procState(stat []byte) (state byte, ppid int) {
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 2 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(fields[1])
	return fields[0][0], ppid
}

// rssKB returns VmRSS of a process (pid 0: this one) in KiB, from /proc/<pid>/status.
func rssKB(pid int) (int64, error) { return procStatusKB(pid, "VmRSS") }

// procStatusKB returns a field given in kB of /proc/<pid>/status (pid 0: this process):
// VmRSS, the resident set now, or VmHWM, its high-water mark.
func procStatusKB(pid int, field string) (int64, error) {
	p := "/proc/self/status"
	if pid != 0 {
		p = filepath.Join("/proc", strconv.Itoa(pid), "status")
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, p)
}

// envCount returns the positive integer in the environment variable name, else def.
func envCount(name string, def int) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil || n <= 0 {
		return def
	}
	return n
}

// reportPercentiles reports the p50, p99 and maximum of lat in milliseconds, as
// <prefix>p50-ms, <prefix>p99-ms and <prefix>max-ms.
func reportPercentiles(b *testing.B, lat []time.Duration, prefix string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p int) float64 {
		i := min(len(lat)-1, len(lat)*p/100)
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(at(50), prefix+"p50-ms")
	b.ReportMetric(at(99), prefix+"p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, prefix+"max-ms")
}
