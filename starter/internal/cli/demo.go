package cli

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/devserver"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// demoFiles are the demo's working directory: the scripted model's scripts (used when no
// DEEPSEEK_API_KEY is set), the output schema of the structured run and a file for the
// children to read.
//
//go:embed demo
var demoFiles embed.FS

// showcase is one delegation of the demo.
type showcase struct {
	name   string
	flags  runFlags
	task   string
	script string // scripted model script, in the demo directory
	// forkOf names the showcase whose child is this one's parent.
	forkOf string
	// cancel cancels the run once its child streamed part of its answer. The run works in
	// its own directory (cancelDir), whose model answers the local worker paces
	// (pacedModel), so the cancel lands mid-answer whatever the model's speed; a run that
	// ends any other way than aborted with a partial answer fails the showcase.
	cancel bool
	want   subagent.StopReason
}

func showcases() []showcase {
	return []showcase{
		{name: "spawn", task: "List the workspace and summarize NOTES.md.", script: "spawn.json",
			flags: runFlags{provider: subagent.ProviderSpawn, label: "demo: spawn"}, want: subagent.StopCompleted},
		{name: "fork", task: "Which checklist step should come last, and why?", forkOf: "spawn",
			flags: runFlags{provider: subagent.ProviderFork, label: "demo: fork"}, want: subagent.StopCompleted},
		{name: "structured", task: "Read NOTES.md and report the checklist as structured data.", script: "structured.json",
			flags: runFlags{provider: subagent.ProviderSpawn, label: "demo: structured", schema: "schema.json"}, want: subagent.StopCompleted},
		{name: "sdk", task: "How often does NOTES.md mention the release? Answer in one sentence.", script: "sdk.json",
			flags: runFlags{provider: subagent.ProviderSDK, label: "demo: sdk child"}, want: subagent.StopCompleted},
		{name: "cancelled", task: "Write a long essay on release engineering.", script: "cancel.json", cancel: true,
			flags: runFlags{provider: subagent.ProviderSpawn, label: "demo: cancelled"}, want: subagent.StopAborted},
	}
}

// demoResult is one row of the results table.
type demoResult struct {
	name       string
	workflowID string
	provider   string
	childID    string
	stop       subagent.StopReason
	excerpt    string
	took       time.Duration
	err        error
}

// runDemo starts the embedded server with its UI and a worker, runs the showcase, prints
// the results and serves until interrupted, or returns with --exit (contract R-81). It exits 1
// when a showcase did not end as it should.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fset := newFlagSet("starter demo", stderr)
	exit := fset.Bool("exit", false, "stop after the showcase instead of serving")
	port := fset.Int("port", 7233, "frontend gRPC `PORT` (0 picks a free one)")
	uiPort := fset.Int("ui-port", 8233, "Web UI `PORT` (0 picks a free one)")
	metricsAddr := fset.String("metrics-addr", "", "serve the worker's Prometheus metrics on http://`ADDR`/metrics")
	connect := fset.Bool("connect", false, "run the showcase once on the Temporal cluster of the client environment (TEMPORAL_ADDRESS, …) and its workers, which must reach this host's temporary directory, instead of on an embedded server")
	if code, ok := parseNoArgs(fset, args, stderr); !ok {
		return code
	}
	if *connect {
		return demoOnCluster(ctx, stdout, stderr)
	}

	dir, err := demoDir()
	if err != nil {
		fmt.Fprintf(stderr, "starter demo: %v\n", err)
		return exitError
	}
	defer os.RemoveAll(dir)

	fmt.Fprintln(stdout, "Starting the embedded Temporal server and its Web UI…")
	// The showcase reports its own failures: the server's and the SDK's logs would only
	// bury the table (a cancelled drive, for one, is logged as an activity error).
	srv, err := devserver.Start(ctx, devserver.Options{Port: *port, UIPort: *uiPort, LogLevel: "error", LogWriter: io.Discard})
	if err != nil {
		fmt.Fprintf(stderr, "starter demo: %v\n", err)
		return exitError
	}
	defer srv.Stop()
	copts := srv.ClientOptions()
	copts.Logger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	local, err := startLocalWorker(ctx, srv, copts, *metricsAddr, app.Options{
		TaskQueue:   workflows.TaskQueue,
		SessionRoot: filepath.Join(dir, "sessions"),
		Logger:      zap.NewNop(),
		Models:      paceUnder(model.NewDefaultRegistry(), filepath.Join(dir, cancelDir)),
	}, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "starter demo: %v\n", err)
		return exitError
	}
	defer func() {
		if err := local.stop(); err != nil {
			fmt.Fprintf(stderr, "starter demo: %v\n", err)
		}
	}()
	c := local.c

	fmt.Fprintf(stdout, "Temporal server  %s\nWeb UI           %s\nWorking dir      %s\n", srv.FrontendAddr(), srv.UIAddr(), dir)
	route := demoRoute(stdout)
	fmt.Fprintln(stdout, "\nRunning the showcase: spawn, fork, structured, sdk child, cancelled…")
	results := runShowcase(ctx, c, dir, route)
	code := printResults(stdout, stderr, results)
	if *exit || ctx.Err() != nil {
		// The server stops with this command: no link to a page that is gone.
		return code
	}
	fmt.Fprintf(stdout, "\nEvery run is a workflow: open %s/namespaces/%s/workflows\n", srv.UIAddr(), srv.Namespace())
	fmt.Fprintf(stdout, "or query them, e.g. SubagentProvider = 'sdk' or SubagentStopReason = 'aborted'.\n")
	fmt.Fprintf(stdout, "\nServing until interrupted (Ctrl-C). Other terminals can use it:\n  export TEMPORAL_ADDRESS=%s\n  go run ./starter run --model-provider scripted --model %s \"your task\"\n",
		srv.FrontendAddr(), filepath.Join(dir, "sdk.json"))
	<-ctx.Done()
	fmt.Fprintln(stdout, "Stopping.")
	return code
}

// cancelDir is the cancelled showcase's working directory, under the demo's.
const cancelDir = "cancelled"

// demoDir makes the showcase's temporary working directory with its scripts and schema, and
// the cancelled showcase's own directory; the caller removes it.
func demoDir() (string, error) {
	dir, err := os.MkdirTemp("", "subflow-demo-")
	if err != nil {
		return "", err
	}
	// The children's cwds are resolved through symlinks (a macOS temporary directory is
	// one): the demo names its directories as they see them, so that pacedModel knows the
	// cancelled showcase's.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if err := writeDemoFiles(dir); err == nil {
		err = os.Mkdir(filepath.Join(dir, cancelDir), 0o755)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// demoOnCluster runs the showcase on the cluster the client environment names, with its
// own workers (deploy/local-cluster, or compose with the workers on this host), and prints
// the results; it exits 1 when a showcase did not end as it should.
func demoOnCluster(ctx context.Context, stdout, stderr io.Writer) int {
	dir, err := demoDir()
	if err != nil {
		fmt.Fprintf(stderr, "starter demo: %v\n", err)
		return exitError
	}
	defer os.RemoveAll(dir)
	c, err := dial(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "starter demo: %v\n", err)
		return exitError
	}
	defer c.Close()
	fmt.Fprintf(stdout, "Working dir      %s\n", dir)
	route := demoRoute(stdout)
	fmt.Fprintln(stdout, "\nRunning the showcase on the cluster: spawn, fork, structured, sdk child, cancelled…")
	code := printResults(stdout, stderr, runShowcase(ctx, c, dir, route))
	fmt.Fprintln(stdout, "\nEvery run is a workflow in the cluster's Web UI; query them, e.g. SubagentProvider = 'sdk' or SubagentStopReason = 'aborted'.")
	return code
}

// writeDemoFiles copies the embedded demo directory into dir.
func writeDemoFiles(dir string) error {
	return fs.WalkDir(demoFiles, "demo", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := demoFiles.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, filepath.Base(path)), data, 0o644)
	})
}

// demoModel says which model the showcase uses. An empty Model means the scripted model
// with each showcase's own script.
type demoModel struct {
	Provider, Model string
}

// demoRoute picks DeepSeek when DEEPSEEK_API_KEY is set, the scripted model otherwise, and
// says which.
func demoRoute(w io.Writer) demoModel {
	if os.Getenv("DEEPSEEK_API_KEY") == "" {
		fmt.Fprintln(w, "Model            scripted (DEEPSEEK_API_KEY is not set: the children answer from scripts, offline)")
		return demoModel{Provider: model.ProviderScripted}
	}
	name := os.Getenv("DEEPSEEK_MODEL")
	if name == "" {
		name = defaultModel
	}
	fmt.Fprintf(w, "Model            DeepSeek %s (DEEPSEEK_API_KEY is set)\n", name)
	return demoModel{Provider: model.ProviderDeepSeek, Model: name}
}

// runShowcase runs the showcases concurrently, a fork after the run it forks, and returns
// their results in showcase order.
func runShowcase(ctx context.Context, c client.Client, dir string, route demoModel) []demoResult {
	list := showcases()
	results := make([]demoResult, len(list))
	done := make(map[string]chan struct{}, len(list))
	for _, s := range list {
		done[s.name] = make(chan struct{})
	}
	var wg sync.WaitGroup
	for i, s := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[s.name])
			f := s.flags
			f.cwd = dir
			if s.cancel {
				f.cwd = filepath.Join(dir, cancelDir)
			}
			f.taskQueue = workflows.TaskQueue
			if s.flags.schema != "" {
				f.schema = filepath.Join(dir, s.flags.schema)
			}
			if s.forkOf != "" {
				<-done[s.forkOf]
				parent := find(list, results, s.forkOf)
				if parent.childID == "" {
					results[i] = demoResult{name: s.name, provider: f.provider, err: fmt.Errorf("no %s child to fork", s.forkOf)}
					return
				}
				f.parent = parent.childID // the fork child inherits the parent's route
			} else {
				f.modelProvider, f.model = route.Provider, route.Model
				if route.Model == "" {
					f.model = filepath.Join(dir, s.script)
				}
			}
			results[i] = runOne(ctx, c, s, f)
		}()
	}
	wg.Wait()
	return results
}

func find(list []showcase, results []demoResult, name string) demoResult {
	for i, s := range list {
		if s.name == name {
			return results[i]
		}
	}
	return demoResult{}
}

// runOne starts one showcase run, cancels it once it streamed text when asked to, and waits
// for its outcome.
func runOne(ctx context.Context, c client.Client, s showcase, f runFlags) demoResult {
	res := demoResult{name: s.name, provider: f.provider}
	begin := time.Now()
	opts, err := f.startOptions(s.task)
	if err != nil {
		res.err = err
		return res
	}
	pub, wr, err := subflow.Start(ctx, c, opts)
	if err != nil {
		res.err = err
		return res
	}
	res.workflowID, res.childID = wr.GetID(), pub.ChildID
	if s.cancel {
		if err := cancelOnceStreamed(ctx, c, wr); err != nil {
			res.err = err
			return res
		}
	}
	var out workflows.Outcome
	if err := wr.Get(ctx, &out); err != nil {
		if out, err = outcomeOf(err); err != nil {
			res.err = err
			return res
		}
	}
	if err := subflow.ResolveOutcome(ctx, c, f.taskQueue, &out); err != nil {
		res.err = err
		return res
	}
	res.took = time.Since(begin)
	res.stop = out.Result.StopReason
	text := newResultJSON(res.workflowID, "", out)
	if text.Structured != nil && string(text.Structured) != "null" {
		res.excerpt = string(text.Structured)
	} else {
		res.excerpt = text.Output
	}
	switch {
	case res.stop != s.want:
		res.err = fmt.Errorf("ended %s, expected %s", res.stop, s.want)
	case s.cancel && strings.TrimSpace(res.excerpt) == "":
		res.err = errors.New("aborted with no partial answer: the cancel landed before the child streamed any")
	}
	return res
}

// cancelOnceStreamed cancels the run once its child has streamed part of its answer, as the
// run's pending drive reports it (subflow.Describe). A run that ended first is left as it
// ended: runOne fails the showcase then.
func cancelOnceStreamed(ctx context.Context, c client.Client, wr client.WorkflowRun) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := subflow.Describe(ctx, c, wr.GetID(), wr.GetRunID())
		if err == nil && st.StopReason != "" {
			return nil
		}
		if err == nil && st.Progress != nil && st.Progress.StreamedBytes > 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	err := c.CancelWorkflow(ctx, wr.GetID(), wr.GetRunID())
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil // it already ended; runOne reports how
	}
	return err
}

// printResults prints the results table to w, and to stderr each showcase that did not end
// as it shows; it returns 0 when every showcase ended as it should, 1 otherwise.
func printResults(w, stderr io.Writer, results []demoResult) int {
	defer func() {
		for _, r := range results {
			if r.err != nil {
				fmt.Fprintf(stderr, "starter demo: showcase %s: %v\n", r.name, r.err)
			}
		}
	}()
	code := exitCompleted
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tWORKFLOW ID\tPROVIDER\tSTOP REASON\tDURATION\tOUTPUT")
	for _, r := range results {
		stop, excerpt := string(r.stop), oneLine(r.excerpt, 60)
		if r.err != nil {
			code = exitError
			excerpt = "FAILED: " + oneLine(r.err.Error(), 80)
		}
		if stop == "" {
			stop = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.name, r.workflowID, r.provider, stop, r.took.Round(10*time.Millisecond), excerpt)
	}
	tw.Flush()
	return code
}

// oneLine returns s on one line, cut to limit runes with "…".
func oneLine(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > limit {
		return string(r[:limit]) + "…"
	}
	return s
}
