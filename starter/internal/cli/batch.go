package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/schollz/progressbar/v3"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/term"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// How often the batch's progress is shown: on a terminal as a bar, else as a line.
const (
	barInterval  = 500 * time.Millisecond
	lineInterval = 5 * time.Second
)

// taskQueueWait is how long `starter batch` waits for a worker to poll its task queue before
// it refuses the queue: a worker started just before the batch may not have polled yet.
const taskQueueWait = 10 * time.Second

// batchFlags are the flags of `starter batch` (contract R-81).
type batchFlags struct {
	concurrency        int
	continueAsNewAfter int
	out                string
	taskQueue          string
	id                 string
	detach             bool
	priority           int
	fairnessKey        string
	weight             float64
}

func (f *batchFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.concurrency, "concurrency", workflows.DefaultBatchConcurrency, "most `N` tasks running at once")
	fs.IntVar(&f.continueAsNewAfter, "continue-as-new-after", workflows.DefaultContinueAsNewAfter, "children one workflow run starts before it continues as new")
	fs.StringVar(&f.out, "out", "", "results `FILE` (JSONL), written here by the starter when the batch ends (default: FILE with .results.jsonl)")
	fs.StringVar(&f.taskQueue, "task-queue", workflows.TaskQueue, "task `QUEUE` of the workers")
	fs.StringVar(&f.id, "id", "", "`WORKFLOW_ID` of the batch, also its SubagentBatch (default batch-<uuid>)")
	fs.BoolVar(&f.detach, "detach", false, "return once every task is handed to the batch; follow it with starter batch status ID")
	fs.IntVar(&f.priority, "priority", workflows.BatchPriority, "task-queue priority `N` of the batch's tasks: 1 (highest) to 5; runs default to 2")
	fs.StringVar(&f.fairnessKey, "fairness-key", "", "fairness `KEY` the batch's tasks share with other batches of that key (default: the batch's id)")
	fs.Float64Var(&f.weight, "weight", 1, "fairness `WEIGHT` of the batch (0.001 to 1000): batches sharing workers progress in proportion to their weights")
}

// check checks the flags every batch start shares (contract R-81).
func (f *batchFlags) check(cmd string) error {
	if f.concurrency < 1 {
		return usagef("%s: --concurrency must be at least 1: %d", cmd, f.concurrency)
	}
	if err := workflows.CheckUserWorkflowID(f.id); err != nil {
		return usagef("%s: --id: %v", cmd, err)
	}
	if f.priority < 0 || f.priority > workflows.MaxPriorityKey { // 0: the default
		return usagef("%s: --priority must be 1 (highest) to %d: %d", cmd, workflows.MaxPriorityKey, f.priority)
	}
	if len(f.fairnessKey) > workflows.MaxFairnessKeyBytes {
		return usagef("%s: --fairness-key is %d bytes, over the server's limit of %d", cmd, len(f.fairnessKey), workflows.MaxFairnessKeyBytes)
	}
	if f.weight != 0 && (f.weight < workflows.MinFairnessWeight || f.weight > workflows.MaxFairnessWeight) { // 0: the default
		return usagef("%s: --weight must be %g to %g: %g", cmd, workflows.MinFairnessWeight, float64(workflows.MaxFairnessWeight), f.weight)
	}
	return nil
}

// taskPriority is the priority of the batch's tasks (workflows.BatchPriorityOf).
func (f *batchFlags) taskPriority(batchID string) temporal.Priority {
	return workflows.BatchPriorityOf(batchID, f.priority, f.fairnessKey, float32(f.weight))
}

// batchPlan is a batch ready to start: its input, where its tasks come from (a tasks file,
// read as a stream, or the tasks a retry read from the ended batch) and where its results go.
type batchPlan struct {
	in      workflows.BatchInput // Total is set by check, Tasks by handOver
	outFile string
	file    *taskFile          // the tasks file; nil for a retry
	given   []workflows.Task   // a retry's tasks
	where   func(i int) string // names given task i, for errors
}

// check makes every check of the tasks before the batch starts, with route (nil: none) to
// their workspaces' queues, and sets in.Total: every bad task is reported in one usageError
// and nothing starts.
func (p *batchPlan) check(route func(*workflows.Task) error) error {
	if p.file != nil {
		n, err := p.file.check(route)
		p.in.Total = n
		return err
	}
	bad := badLines{source: "retry of " + p.in.RetryOf}
	for i := range p.given {
		if route != nil {
			if err := route(&p.given[i]); err != nil {
				bad.add(p.where(i), err)
			}
		}
	}
	p.in.Total = len(p.given)
	return bad.err()
}

// tasks yields the checked tasks in order, routed by route (a retry's were routed in place
// by check).
func (p *batchPlan) tasks(route func(*workflows.Task) error) iter.Seq2[workflows.Task, error] {
	if p.file != nil {
		return p.file.tasks(route)
	}
	return func(yield func(workflows.Task, error) bool) {
		for _, t := range p.given {
			if !yield(t, nil) {
				return
			}
		}
	}
}

// handOver starts the batch by start, with its first tasks inline in its input, then hands it
// the others page by page by send, reading the tasks as it goes (subflow.TaskStream): the
// starter holds a page at a time, whatever the batch's size.
func (p *batchPlan) handOver(route func(*workflows.Task) error, start func(workflows.BatchInput) error, send func(workflows.TaskPage) error) error {
	s := subflow.NewTaskStream(p.tasks(route))
	defer s.Close()
	in := p.in
	var err error
	if in.Tasks, err = s.Inline(); err != nil {
		return err
	}
	if err := start(in); err != nil {
		return err
	}
	for page, err := range s.Pages() {
		if err != nil {
			return err
		}
		if err := send(page); err != nil {
			return err
		}
	}
	if s.Count() != p.in.Total {
		src := "the batch's tasks"
		if p.file != nil {
			src = p.file.path
		}
		return fmt.Errorf("%s now holds %d tasks, not the %d checked: the file changed while the batch started", src, s.Count(), p.in.Total)
	}
	return nil
}

// runBatch runs `starter batch FILE.jsonl` (every line one task object; see
// workflows.ParseTaskLine) and the batch subcommands (`starter batch status|results|pause|
// resume|resize|cancel|retry ID`). It validates the whole file first (exit 2 with the file
// and line of the first bad task), starts the Batch workflow, hands it every task, shows its
// progress, writes the results file and prints a summary per stop reason with the p50/p99
// duration; it exits 0 only when every task completed, 1 otherwise. With --detach it returns
// once the batch holds every task. An interrupt asks whether to cancel the batch or detach
// from it; without a terminal it detaches.
func runBatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if sub, ok := batchCommands[args[0]]; ok {
			return sub(ctx, args[1:], stdout, stderr)
		}
	}
	fs := newUsageFlagSet("starter batch", "usage: starter batch [flags] FILE.jsonl\n       starter batch status|results|pause|resume|resize|cancel|retry ID", stderr)
	var f batchFlags
	f.register(fs)
	positional, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(positional) != 1 {
		fs.Usage()
		return exitUsage
	}
	p, err := f.plan(positional[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	c, ok := dialOrReport(ctx, stderr)
	if !ok {
		return exitError
	}
	defer c.Close()
	return startBatch(ctx, c, p, f, stdout, stderr)
}

// startBatch refuses a batch id an earlier batch used (subflow.CheckBatchID) and a task
// queue no worker polls (subflow.CheckTaskQueue), checks the planned batch's tasks, routing
// each to its workspace's queue (exit 2 on a bad task or a cwd served by no worker: nothing
// starts), starts the batch, hands it its tasks as it reads them, and follows it unless
// f.detach.
func startBatch(ctx context.Context, c client.Client, p batchPlan, f batchFlags, stdout, stderr io.Writer) int {
	err := subflow.CheckBatchID(ctx, c, p.in.BatchID)
	if err == nil {
		err = subflow.CheckTaskQueue(ctx, c, f.taskQueue, taskQueueWait)
	}
	if err != nil {
		var ve *subagent.ValidationError
		if errors.As(err, &ve) {
			fmt.Fprintf(stderr, "starter batch: %s\n", ve.Message)
			return exitUsage
		}
		fmt.Fprintf(stderr, "starter batch: %v\n", err)
		return exitError
	}
	w, err := subflow.ReadWorkspaces(ctx, c, p.in.TaskQueue)
	if err != nil {
		fmt.Fprintf(stderr, "starter batch: %v\n", err)
		return exitError
	}
	route := func(t *workflows.Task) error { return w.RouteTask(t, p.in.Defaults) }
	if err := p.check(route); err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	opts := client.StartWorkflowOptions{
		ID:            p.in.BatchID,
		TaskQueue:     f.taskQueue,
		StaticSummary: fmt.Sprintf("batch of %d tasks", p.in.Total),
		// The batch's children and their activities inherit it.
		Priority: f.taskPriority(p.in.BatchID),
	}
	if p.in.RetryOf != "" {
		opts.StaticSummary += ", retry of " + p.in.RetryOf
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(workflows.AttrRetryOf.ValueSet(p.in.RetryOf))
	}
	var wr client.WorkflowRun
	err = p.handOver(route, func(in workflows.BatchInput) (err error) {
		if wr, err = c.ExecuteWorkflow(ctx, opts, workflows.BatchWorkflowName, in); err != nil {
			return fmt.Errorf("start %s: %w", in.BatchID, err)
		}
		return nil
	}, func(page workflows.TaskPage) error {
		return subflow.SendTaskPage(ctx, c, p.in.BatchID, page)
	})
	if err != nil {
		var ue *usageError
		if !errors.As(err, &ue) {
			err = fmt.Errorf("starter batch: %w", err)
		}
		fmt.Fprintln(stderr, err)
		return exitError
	}
	if f.detach {
		fmt.Fprintf(stderr, "started batch %s: %d tasks; follow it with `starter batch status %s`, read results with `starter batch results %s`\n",
			wr.GetID(), p.in.Total, wr.GetID(), wr.GetID())
		fmt.Fprintln(stdout, wr.GetID())
		return exitCompleted
	}
	fmt.Fprintf(stderr, "started batch %s: %d tasks, results to %s\n", wr.GetID(), p.in.Total, p.outFile)
	return followBatch(ctx, c, wr, p.in.Total, p.outFile, stdout, stderr)
}

// followBatch shows a batch's progress until it ends, writes its results to outFile (when
// set) and prints its summary.
func followBatch(ctx context.Context, c client.Client, wr client.WorkflowRun, total int, outFile string, stdout, stderr io.Writer) int {
	w := &batchWatch{c: c, run: wr, total: total, stdout: stdout, stderr: stderr, stdin: os.Stdin,
		bar: isTerminal(stdout), interactive: isTerminal(os.Stdin) && isTerminal(stderr)}
	sum, detached, err := w.wait(ctx)
	switch {
	case detached:
		fmt.Fprintf(stderr, "starter batch: detached; batch %s goes on (`starter batch results %s` reads its results)\n", wr.GetID(), wr.GetID())
		return exitError
	case err != nil:
		fmt.Fprintf(stderr, "starter batch: %s failed: %v\n", wr.GetID(), err)
		return exitError
	}
	if outFile != "" {
		n, err := writeResultsFile(context.Background(), c, wr.GetID(), outFile, resultsWait, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "starter batch: %v\n", err)
			return exitError
		}
		sum.OutFile = outFile
		if n < sum.Done {
			fmt.Fprintf(stderr, "starter batch: %s holds %d of %d results: the others are no longer in Temporal\n", outFile, n, sum.Done)
		}
	}
	printBatchSummary(stdout, sum)
	if !sum.Completed() {
		return exitError
	}
	return exitCompleted
}

// plan checks the flags and returns the batch to start from the tasks file at path, which
// startBatch reads (batchPlan.check, then batchPlan.handOver).
func (f *batchFlags) plan(path string) (batchPlan, error) {
	if err := f.check("starter batch"); err != nil {
		return batchPlan{}, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return batchPlan{}, usagef("starter batch: %s: %v", path, err)
	}
	dir, err := os.Getwd()
	if err != nil {
		return batchPlan{}, usagef("starter batch: working directory: %v", err)
	}
	in := workflows.BatchInput{
		BatchID:            f.id,
		Concurrency:        f.concurrency,
		ContinueAsNewAfter: f.continueAsNewAfter,
		TaskQueue:          f.taskQueue,
		Defaults: workflows.TaskDefaults{
			Dir:   dir,
			Route: rootDefaults,
		},
	}
	if in.BatchID == "" {
		in.BatchID = "batch-" + uuid.NewString()
	}
	p := batchPlan{in: in, file: newTaskFile(abs, in.BatchID, in.Defaults)}
	if f.detach {
		if f.out != "" {
			return batchPlan{}, usagef("starter batch: --out needs the starter to follow the batch: without --detach, or `starter batch results ID --out FILE`")
		}
		return p, nil
	}
	out := f.out
	if out == "" {
		out = strings.TrimSuffix(abs, ".jsonl") + ".results.jsonl"
	}
	if p.outFile, err = filepath.Abs(out); err != nil {
		return batchPlan{}, usagef("starter batch: --out %s: %v", out, err)
	}
	if p.outFile == abs {
		return batchPlan{}, usagef("starter batch: --out %s would overwrite the tasks", out)
	}
	if st, err := os.Stat(filepath.Dir(p.outFile)); err != nil || !st.IsDir() {
		return batchPlan{}, usagef("starter batch: --out %s: no such directory", out)
	}
	return p, nil
}

// batchWatch follows a started batch until it ends or the user detaches.
type batchWatch struct {
	c           client.Client
	run         client.WorkflowRun
	total       int
	stdout      io.Writer
	stderr      io.Writer
	stdin       io.Reader
	bar         bool // draw a progress bar on stdout, else print progress lines on stderr
	interactive bool // ask on an interrupt, else detach
}

// wait waits for the batch's summary, showing its progress. A cancelled batch gives the
// summary its cancellation carried.
func (w *batchWatch) wait(ctx context.Context) (sum workflows.BatchSummary, detached bool, err error) {
	done := make(chan error, 1)
	go func() { done <- w.run.Get(context.Background(), &sum) }()

	show := w.lines()
	interval := lineInterval
	if w.bar {
		show = w.progressBar()
		interval = barInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	interrupted := ctx.Done()
	for {
		select {
		case err := <-done:
			sum, err = workflows.BatchOutcome(sum, err)
			if err == nil {
				show(sum, true)
			}
			return sum, false, err
		case <-tick.C:
			// Not ctx: progress goes on showing after an interrupt, while the batch cancels.
			if p, err := queryProgress(w.c, w.run.GetID()); err == nil {
				show(p, false)
			}
		case <-interrupted:
			interrupted = nil
			// A second interrupt kills the starter; the batch goes on.
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			if !w.interactive || !w.askCancel() {
				return sum, true, nil
			}
			fmt.Fprintf(w.stderr, "\nstarter batch: cancelling %s; running tasks end aborted\n", w.run.GetID())
			if err := w.c.CancelWorkflow(context.Background(), w.run.GetID(), ""); err != nil {
				return sum, false, fmt.Errorf("cancel %s: %w", w.run.GetID(), err)
			}
		}
	}
}

// askCancel asks whether to cancel the batch (true) or detach (false).
func (w *batchWatch) askCancel() bool {
	fmt.Fprint(w.stderr, "\ncancel the batch or detach? [c/d] ")
	answer, _ := bufio.NewReader(w.stdin).ReadString('\n')
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(answer)), "c")
}

// progressBar returns a show function drawing a bar of done tasks.
func (w *batchWatch) progressBar() func(workflows.BatchSummary, bool) {
	bar := progressbar.NewOptions(w.total,
		progressbar.OptionSetWriter(w.stdout),
		progressbar.OptionSetDescription("batch"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionFullWidth(),
		progressbar.OptionThrottle(barInterval/2),
	)
	return func(s workflows.BatchSummary, final bool) {
		bar.Describe(fmt.Sprintf("%d running, %d not completed", s.Running, s.Done-s.ByStopReason[subagent.StopCompleted]))
		_ = bar.Set(s.Done)
		if final {
			_ = bar.Exit()
			fmt.Fprintln(w.stdout)
		}
	}
}

// lines returns a show function printing a progress line on stderr when the counts change.
func (w *batchWatch) lines() func(workflows.BatchSummary, bool) {
	last := ""
	return func(s workflows.BatchSummary, _ bool) {
		line := progressLine(w.run.GetID(), s)
		if line != last {
			fmt.Fprintln(w.stderr, line)
			last = line
		}
	}
}

// progressLine is the one-line progress of a batch without a terminal: the done tasks by
// stop reason (completed always, the others once one has it) and those without an outcome,
// so that the counts add up to the done ones.
func progressLine(id string, s workflows.BatchSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "batch %s: %d/%d done (%d running, %d queued", id, s.Done, s.Total, s.Running, s.Queued)
	for _, stop := range stopReasons(s) {
		if n := s.ByStopReason[stop]; n > 0 || stop == subagent.StopCompleted {
			fmt.Fprintf(&b, ", %d %s", n, stop)
		}
	}
	fmt.Fprintf(&b, ", %d failed)", s.Failed)
	return b.String()
}

// knownStopReasons are the stop reasons in the order the summary and the progress line give
// them.
var knownStopReasons = []subagent.StopReason{subagent.StopCompleted, subagent.StopAborted, subagent.StopMaxTokens, subagent.StopRefusal, subagent.StopError}

// stopReasons is knownStopReasons, then any other reason s counts, sorted: a newer worker
// may report one this starter does not know.
func stopReasons(s workflows.BatchSummary) []subagent.StopReason {
	all := slices.Clone(knownStopReasons)
	for _, stop := range slices.Sorted(maps.Keys(s.ByStopReason)) {
		if !slices.Contains(knownStopReasons, stop) {
			all = append(all, stop)
		}
	}
	return all
}

// queryProgress asks the batch's latest run for its progress.
func queryProgress(c client.Client, id string) (workflows.BatchSummary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), barInterval*4)
	defer cancel()
	var s workflows.BatchSummary
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryProgress)
	if err != nil {
		return s, err
	}
	return s, v.Get(&s)
}

// printBatchSummary prints the count of tasks per stop reason, then those that ended without
// an outcome ("failed": rejected, failed, or not startable) and those never started, as the
// batch's page counts them, and the p50/p99 task duration.
func printBatchSummary(w io.Writer, s workflows.BatchSummary) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "batch %s: %d of %d tasks done", s.BatchID, s.Done, s.Total)
	if s.OutFile != "" {
		fmt.Fprintf(tw, ", results in %s", s.OutFile)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "stop reason\tcount")
	for _, stop := range stopReasons(s) {
		fmt.Fprintf(tw, "%s\t%d\n", stop, s.ByStopReason[stop])
	}
	fmt.Fprintf(tw, "failed\t%d\n", s.Failed)
	if left := s.Total - s.Done; left > 0 {
		fmt.Fprintf(tw, "not started\t%d\n", left)
	}
	fmt.Fprintf(tw, "tokens\t%d in, %d out\n", s.InputTokens, s.OutputTokens)
	fmt.Fprintf(tw, "duration\tp50 %v  p99 %v\n", roundDuration(s.Durations.Percentile(50)), roundDuration(s.Durations.Percentile(99)))
	_ = tw.Flush()
}

// roundDuration keeps three significant digits or so: 1.23s, 45ms.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	default:
		return d.Round(time.Millisecond)
	}
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
