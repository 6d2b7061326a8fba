package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// runStatus prints where a run stands: phase, child id, progress and the tail of the
// partial output (contract R-75).
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("starter status", stderr)
	asJSON := fs.Bool("json", false, "print the status as one JSON object")
	tree := fs.Bool("tree", false, "print the run's delegation tree: workflow id, provider, depth, phase or stop reason, label")
	c, id, code, ok := dialID(ctx, fs, args, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	if *tree {
		root, err := delegationTree(ctx, c, id)
		if err != nil {
			fmt.Fprintf(stderr, "starter status: %v\n", err)
			return exitError
		}
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(root); err != nil {
				fmt.Fprintf(stderr, "starter status: %v\n", err)
				return exitError
			}
			return exitCompleted
		}
		printTree(stdout, root, "")
		return exitCompleted
	}
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		fmt.Fprintf(stderr, "starter status: %s: %v\n", id, err)
		return exitError
	}
	if desc.GetWorkflowExecutionInfo().GetType().GetName() == workflows.BatchWorkflowName {
		return batchStatus(ctx, c, desc, stdout, stderr, *asJSON)
	}
	st, err := subflow.Describe(ctx, c, id, "")
	if err != nil {
		fmt.Fprintf(stderr, "starter status: %v\n", err)
		return exitError
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(st); err != nil {
			fmt.Fprintf(stderr, "starter status: %v\n", err)
			return exitError
		}
		return exitCompleted
	}
	printStatus(stdout, id, st)
	return exitCompleted
}

// batchStatusJSON is the --json object of the status of a batch.
type batchStatusJSON struct {
	Kind   string `json:"kind"`
	Status string `json:"status"`
	workflows.BatchSummary
}

// batchStatus prints where the batch id stands: its workflow status and its progress.
func batchStatus(ctx context.Context, c client.Client, desc *workflowservice.DescribeWorkflowExecutionResponse, stdout, stderr io.Writer, asJSON bool) int {
	id := desc.GetWorkflowExecutionInfo().GetExecution().GetWorkflowId()
	status := statusName(desc.GetWorkflowExecutionInfo().GetStatus())
	var sum workflows.BatchSummary
	var err error
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		// At once, even while no worker of the batch's build polls.
		sum, err = subflow.RunningBatchSummary(ctx, c, desc)
	} else {
		var v converter.EncodedValue
		if v, err = c.QueryWorkflow(ctx, id, "", workflows.QueryProgress); err == nil {
			err = v.Get(&sum)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "starter status: progress of batch %s: %v\n", id, err)
		return exitError
	}
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(batchStatusJSON{Kind: "batch", Status: status, BatchSummary: sum}); err != nil {
			fmt.Fprintf(stderr, "starter status: %v\n", err)
			return exitError
		}
		return exitCompleted
	}
	fmt.Fprintf(stdout, "batch     %s\nstatus    %s\nprogress  %s\n", id, status, progressLine(id, sum))
	if sum.Priority != nil {
		fmt.Fprintf(stdout, "priority  %s\n", sum.Priority)
	}
	if sum.BuildHeld != "" {
		fmt.Fprintf(stdout, "build     %s\n", sum.BuildHeld)
	}
	if sum.Unanswered != "" {
		fmt.Fprintf(stdout, "stale     %s\n", sum.Unanswered)
	}
	if sum.OutFile != "" {
		fmt.Fprintf(stdout, "results   %s\n", sum.OutFile)
	}
	return exitCompleted
}

func printStatus(w io.Writer, id string, st workflows.Status) {
	fmt.Fprintf(w, "workflow  %s\nphase     %s\nprovider  %s\n", id, st.Phase, st.Provider)
	field := func(name, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-9s %s\n", name, v)
		}
	}
	field("label", st.Label)
	field("parent", st.Parent)
	field("child", st.ChildID)
	if st.ChildID != "" {
		fmt.Fprintf(w, "depth     %d\n", st.Depth)
	}
	field("priority", st.Priority.String())
	field("stop", string(st.StopReason))
	field("error", st.Error)
	if s := st.Summary; s != nil {
		fmt.Fprintf(w, "summary   %d steps, %d bytes streamed, %d output tokens\n", s.Steps, s.StreamedBytes, s.OutputTokens)
	}
	if p := st.Progress; p != nil {
		fmt.Fprintf(w, "progress  %s\n", p)
		if p.Tail != "" {
			fmt.Fprintf(w, "tail\n%s\n", p.Tail)
		}
	}
	if d := st.Digest; d != nil {
		printDigest(w, d)
	}
}

// printDigest prints what the child did (docs/digest.md): the totals, then a row per tool
// call or tool-less step, as the run's Current Details show them in the Web UI.
func printDigest(w io.Writer, d *subagent.Digest) {
	fmt.Fprintf(w, "steps     %d, %d tool calls (%d failed), %d input / %d output tokens\n",
		d.TotalSteps, d.ToolCalls, d.ToolErrors, d.InputTokens, d.OutputTokens)
	if d.EndMessage != "" {
		fmt.Fprintf(w, "ended     %s\n", d.EndMessage)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tTOKENS IN/OUT\tMODEL\tTOOL\tINPUT\tRESULT\tTIME")
	for i, s := range d.Steps {
		if d.OmittedSteps > 0 && i > 0 && d.Steps[i-1].Step < s.Step-1 {
			fmt.Fprintf(tw, "…\t\t\t(%d steps omitted)\t\t\t\n", d.OmittedSteps)
		}
		step := fmt.Sprintf("%d\t%d/%d\t%s", s.Step, s.InputTokens, s.OutputTokens, time.Duration(s.DurationMs)*time.Millisecond)
		if len(s.Tools) == 0 {
			fmt.Fprintf(tw, "%s\t\t\t\t\n", step)
		}
		for j, t := range s.Tools {
			if j > 0 {
				step = "\t\t"
			}
			result := t.Result
			if t.Error != "" {
				result += ": " + t.Error
			}
			if t.WorkflowID != "" {
				result += " (run " + t.WorkflowID + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", step, t.Name, t.Input, result, time.Duration(t.DurationMs)*time.Millisecond)
		}
		if s.OmittedTools > 0 {
			fmt.Fprintf(tw, "\t\t\t(%d more tool calls)\t\t\t\n", s.OmittedTools)
		}
	}
	tw.Flush()
	if d.Answer != "" {
		fmt.Fprintf(w, "answer    %s\n", d.Answer)
	}
}

// parseID parses a command line of the form [flags] ID. ok is false when the command must
// exit with code.
func parseID(fs *flag.FlagSet, args []string) (id string, code int, ok bool) {
	positional, code, ok := parseArgs(fs, args)
	if !ok {
		return "", code, false
	}
	if len(positional) != 1 {
		fmt.Fprintf(fs.Output(), "usage: %s ID\n", fs.Name())
		return "", exitUsage, false
	}
	return positional[0], 0, true
}

// parseArgs parses args with fs, flags and positional arguments in any order, and returns
// the positional ones. When ok is false the subcommand exits with code: 0 after -h, 2 for a
// line the flag package refused (it printed why).
func parseArgs(fs *flag.FlagSet, args []string) (positional []string, code int, ok bool) {
	positional, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, exitCompleted, false
	}
	if err != nil {
		return nil, exitUsage, false
	}
	return positional, 0, true
}

// newFlagSet returns the flag set of subcommand name: it reports errors to stderr and lets
// the subcommand choose the exit code.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// newUsageFlagSet is newFlagSet with a usage message: the usage line(s), then the flags.
func newUsageFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet(name, stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseNoArgs parses the flags of a subcommand that takes no argument. When ok is false the
// subcommand exits with code: the line was refused, an unexpected argument named on stderr.
func parseNoArgs(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	positional, code, ok := parseArgs(fs, args)
	if !ok {
		return code, false
	}
	if len(positional) > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), positional[0])
		return exitUsage, false
	}
	return 0, true
}

// dialOrReport connects to the server; when it cannot, it prints the error to stderr and
// ok is false: the subcommand exits exitError. The caller closes c.
func dialOrReport(ctx context.Context, stderr io.Writer) (c client.Client, ok bool) {
	c, err := dial(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, false
	}
	return c, true
}

// describeOrReport describes workflow id for subcommand fs; when it cannot, it prints
// "<subcommand>: <id>: <error>" to stderr and ok is false: the subcommand exits exitError.
func describeOrReport(ctx context.Context, c client.Client, fs *flag.FlagSet, id string, stderr io.Writer) (desc *workflowservice.DescribeWorkflowExecutionResponse, ok bool) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s: %v\n", fs.Name(), id, err)
		return nil, false
	}
	return desc, true
}

// dialID parses the flags and the one ID of a subcommand that acts on a workflow, then
// connects to the server. When ok is false the subcommand exits with code: the line was
// refused (its usage is printed) or the server is unreachable (the error is printed). The
// caller closes c.
func dialID(ctx context.Context, fs *flag.FlagSet, args []string, stderr io.Writer) (c client.Client, id string, code int, ok bool) {
	id, code, ok = parseID(fs, args)
	if !ok {
		return nil, "", code, false
	}
	c, ok = dialOrReport(ctx, stderr)
	if !ok {
		return nil, "", exitError, false
	}
	return c, id, 0, true
}
