package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// batchCommands are the subcommands of `starter batch` that act on a started batch by id.
var batchCommands map[string]command

func init() {
	batchCommands = map[string]command{
		"status":  runBatchStatus,
		"results": runBatchResults,
		"pause":   batchControl("pause", workflows.UpdatePause),
		"resume":  batchControl("resume", workflows.UpdateResume),
		"cancel":  batchControl("cancel", workflows.UpdateCancel),
		"resize":  runBatchResize,
		"retry":   runBatchRetry,
	}
}

// batchControl returns the subcommand sending update name to a batch; it prints the
// batch's state after the change.
func batchControl(verb, name string) command {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		fs := newFlagSet("starter batch "+verb, stderr)
		id, code, ok := parseID(fs, args)
		if !ok {
			return code
		}
		return sendControl(ctx, id, "starter batch "+verb, name, nil, stdout, stderr)
	}
}

// runBatchResize sets a running batch's concurrency.
func runBatchResize(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("starter batch resize", stderr)
	n := fs.Int("concurrency", 0, "new most `N` tasks running at once")
	id, code, ok := parseID(fs, args)
	if !ok {
		return code
	}
	if *n < 1 {
		fmt.Fprintf(stderr, "starter batch resize: --concurrency must be at least 1: %d\n", *n)
		return exitUsage
	}
	return sendControl(ctx, id, "starter batch resize", workflows.UpdateResize, *n, stdout, stderr)
}

func sendControl(ctx context.Context, id, cmd, name string, arg any, stdout, stderr io.Writer) int {
	c, ok := dialOrReport(ctx, stderr)
	if !ok {
		return exitError
	}
	defer c.Close()
	var args []any
	if arg != nil {
		args = append(args, arg)
	}
	var sum workflows.BatchSummary
	if err := subflow.UpdateBatch(ctx, c, id, name, &sum, args...); err != nil {
		fmt.Fprintf(stderr, "%s: %s: %v\n", cmd, id, err)
		return exitError
	}
	fmt.Fprintln(stdout, stateLine(id, sum))
	return exitCompleted
}

// stateLine is the progress line with the batch's controls.
func stateLine(id string, s workflows.BatchSummary) string {
	state := "running"
	switch {
	case s.Cancelled:
		state = "cancelled"
	case s.Paused:
		state = "paused"
	}
	return fmt.Sprintf("%s, concurrency %d, %s tokens in/out %d/%d", progressLine(id, s), s.Concurrency, state, s.InputTokens, s.OutputTokens)
}

// runBatchStatus shows a batch's live progress until it ends (the bar again), or with --json
// prints its summary once.
func runBatchStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("starter batch status", stderr)
	asJSON := fs.Bool("json", false, "print the summary once as JSON")
	c, id, code, ok := dialID(ctx, fs, args, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	sum, err := subflow.BatchSummaryOf(ctx, c, id)
	if err != nil {
		fmt.Fprintf(stderr, "starter batch status: %s: %v\n", id, err)
		return exitError
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(sum)
		return exitCompleted
	}
	if sum.BuildHeld != "" {
		fmt.Fprintf(stderr, "starter batch status: %s %s\n", id, sum.BuildHeld)
	}
	if sum.Unanswered != "" {
		// The watch below shows nothing until the batch answers again.
		fmt.Fprintf(stderr, "starter batch status: %s\n%s\n", sum.Unanswered, progressLine(id, sum))
	}
	return followBatch(ctx, c, c.GetWorkflow(ctx, id, ""), sum.Total, "", stdout, stderr)
}

// runBatchResults writes every finished task's result of a batch as JSONL, ordered by task
// number, to stdout or --out. It reads them from Temporal only, so it works from any machine
// that reaches the frontend.
func runBatchResults(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("starter batch results", stderr)
	out := fs.String("out", "", "write to `FILE` instead of stdout")
	wait := fs.Duration("wait", resultsWait, "how long to wait for finished tasks that visibility does not list yet")
	c, id, code, ok := dialID(ctx, fs, args, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	if *out != "" {
		n, err := writeResultsFile(ctx, c, id, *out, *wait, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "starter batch results: %v\n", err)
			return exitError
		}
		fmt.Fprintf(stderr, "%d results of %s in %s\n", n, id, *out)
		return exitCompleted
	}
	buf := bufio.NewWriter(stdout)
	enc := resultEncoder(buf)
	err := subflow.StreamBatchResults(ctx, c, id, resultsOptions(id, *wait, stderr), func(r workflows.BatchResult) error { return enc.Encode(r) })
	if ferr := buf.Flush(); err == nil {
		err = ferr
	}
	var short *subflow.MissingResults
	if err != nil && !errors.As(err, &short) {
		fmt.Fprintf(stderr, "starter batch results: %s: %v\n", id, err)
		return exitError
	}
	if short != nil {
		fmt.Fprintf(stderr, "starter batch results: %v\n", short)
		return exitError
	}
	return exitCompleted
}

// resultsWait is how long the batch commands wait for results that visibility does not list
// yet (see subflow.BatchResults).
const resultsWait = 2 * time.Minute

// resultsOptions waits up to wait for the results visibility does not list yet, saying so on
// stderr.
func resultsOptions(id string, wait time.Duration, stderr io.Writer) subflow.BatchResultsOptions {
	return subflow.BatchResultsOptions{
		Namespace: namespace(),
		Wait:      wait,
		Missing: func(m subflow.MissingResults) {
			fmt.Fprintf(stderr, "starter: %v; waiting up to %v\n", &m, wait)
		},
	}
}

// writeResultsFile writes the results of batch id to path as they are read, in task order
// (through a temporary file, so a reader never sees half of it), and returns their count.
func writeResultsFile(ctx context.Context, c client.Client, id, path string, wait time.Duration, stderr io.Writer) (int, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return 0, fmt.Errorf("write results to %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	buf := bufio.NewWriter(tmp)
	enc := resultEncoder(buf)
	n := 0
	err = subflow.StreamBatchResults(ctx, c, id, resultsOptions(id, wait, stderr), func(r workflows.BatchResult) error {
		n++
		return enc.Encode(r)
	})
	if err != nil {
		tmp.Close()
		return 0, fmt.Errorf("read results of %s: %w", id, err)
	}
	if err := buf.Flush(); err != nil {
		tmp.Close()
		return 0, fmt.Errorf("write results to %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return 0, fmt.Errorf("write results to %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, fmt.Errorf("write results to %s: %w", path, err)
	}
	return n, nil
}

// resultEncoder writes results as JSONL, one per line, as they are.
func resultEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// completed reports whether a result is one `starter batch retry` does not run again: a
// run that ended completed. Every other task of the batch is retried: failed, aborted,
// max-tokens, refused, and never started.
func completed(r workflows.BatchResult) bool {
	return r.Error == "" && r.StopReason == subagent.StopCompleted
}

// runBatchRetry starts a new batch of the tasks of batch ID that did not complete (failed,
// aborted, max-tokens, never started: every task without a completed result), each as it was
// started the first time or, never started, as the batch was given it, linked to the first
// batch by the SubagentRetryOf search attribute. A batch still running is refused (exit 2):
// its tasks are not settled. It then follows the new batch like `starter batch`.
func runBatchRetry(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("starter batch retry", stderr)
	var f batchFlags
	f.register(fs)
	c, id, code, ok := dialID(ctx, fs, args, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	if err := f.check("starter batch retry"); err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		fmt.Fprintf(stderr, "starter batch retry: %s: %v\n", id, err)
		return exitError
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		sum, _ := subflow.BatchSummaryOf(ctx, c, id)
		fmt.Fprintf(stderr, "starter batch retry: %s is still running (%d of %d tasks done): retry it once it ended, or cancel it first (`starter batch cancel %s`)\n",
			id, sum.Done, sum.Total, id)
		return exitUsage
	}
	started := map[int]string{} // the workflow id each task ran as
	done := map[int]bool{}
	err = subflow.StreamBatchResults(ctx, c, id, resultsOptions(id, resultsWait, stderr), func(r workflows.BatchResult) error {
		if completed(r) {
			done[r.Index] = true
		} else if r.WorkflowID != "" {
			started[r.Index] = r.WorkflowID
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "starter batch retry: %s: %v\n", id, err)
		return exitError
	}
	given, defaults, err := subflow.BatchTasks(ctx, c, id)
	if err != nil {
		fmt.Fprintf(stderr, "starter batch retry: %s: %v\n", id, err)
		return exitError
	}
	total := len(given)
	if sum, err := subflow.BatchSummaryOf(ctx, c, id); err == nil {
		total = max(total, sum.Total)
	}
	var (
		tasks   []workflows.Task
		retried []string // where each task comes from, for errors
		lost    []int    // tasks neither started nor found in the batch's history
	)
	for i := range total {
		if done[i] {
			continue
		}
		if wid, ok := started[i]; ok {
			in, err := subflow.StartInputOf(ctx, c, wid, "")
			if err != nil {
				fmt.Fprintf(stderr, "starter batch retry: %s: %v\n", id, err)
				return exitError
			}
			tasks = append(tasks, workflows.TaskOf(in))
			retried = append(retried, "retry of "+wid)
			continue
		}
		t, ok := given[i]
		if !ok {
			lost = append(lost, i)
			continue
		}
		in, err := t.StartInput("", defaults)
		if err != nil {
			fmt.Fprintf(stderr, "starter batch retry: task %d of %s: %v\n", i, id, err)
			return exitError
		}
		flat := workflows.TaskOf(in)
		flat.Timeout = t.Timeout
		tasks = append(tasks, flat)
		retried = append(retried, fmt.Sprintf("retry of task %d of %s", i, id))
	}
	if len(lost) > 0 {
		fmt.Fprintf(stderr, "starter batch retry: %d tasks of %s were never handed to the batch and cannot be retried (first: task %d)\n", len(lost), id, lost[0])
	}
	if len(tasks) == 0 {
		fmt.Fprintf(stderr, "starter batch retry: every task of %s completed\n", id)
		return exitCompleted
	}
	p := batchPlan{in: workflows.BatchInput{
		BatchID: f.id, Concurrency: f.concurrency, ContinueAsNewAfter: f.continueAsNewAfter,
		TaskQueue: f.taskQueue, RetryOf: id, Total: len(tasks),
	}, outFile: f.out, given: tasks, where: func(i int) string { return retried[i] }}
	if p.in.BatchID == "" {
		p.in.BatchID = "batch-" + uuid.NewString()
	}
	return startBatch(ctx, c, p, f, stdout, stderr)
}
