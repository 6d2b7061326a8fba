package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// Default route of a run without --parent and without route flags.
const (
	defaultModelProvider = model.ProviderDeepSeek
	defaultModel         = "deepseek-v4-flash"
)

// followInterval is how often --follow polls the run's progress.
const followInterval = 300 * time.Millisecond

// runFlags are the flags of `starter run` (contract R-81).
type runFlags struct {
	provider      string
	parent        string
	cwd           string
	modelProvider string
	model         string
	maxTokens     int64
	tokenBudget   int64
	schema        string
	maxDepth      string
	persona       string
	allow, deny   app.StringList
	label         string
	id            string
	taskQueue     string
	priority      int
	timeout       time.Duration
	timeoutSet    bool // --timeout was given, so 0 is refused rather than read as none
	detach        bool
	follow        bool
	json          bool
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.provider, "provider", subagent.ProviderSpawn, "subagent provider: spawn, fork or sdk")
	fs.StringVar(&f.parent, "parent", "", "parent `SESSION` id; without it a root session is created from --cwd")
	fs.StringVar(&f.cwd, "cwd", "", "working `DIR` of the root session (default: the current directory)")
	fs.StringVar(&f.modelProvider, "model-provider", "", "model provider `NAME`: deepseek-official, openai-compatible or scripted")
	fs.StringVar(&f.model, "model", "", "model `NAME` (for scripted: the path of the script)")
	fs.Int64Var(&f.maxTokens, "max-tokens", 0, "output token cap `N` of the child")
	fs.Int64Var(&f.tokenBudget, "token-budget", 0, "end the child max-tokens once its turn used `N` tokens (input and output)")
	fs.StringVar(&f.schema, "schema", "", "JSON schema `FILE` of a structured result")
	fs.StringVar(&f.maxDepth, "max-depth", "", "delegation depth cap `N`")
	fs.StringVar(&f.persona, "persona", "", "persona `TEXT` replacing the child's persona section")
	fs.Var(&f.allow, "allow", "allow only this `TOOL` (repeatable)")
	fs.Var(&f.deny, "deny", "deny this `TOOL` (repeatable)")
	fs.StringVar(&f.label, "label", "", "short display label `TEXT`")
	fs.StringVar(&f.id, "id", "", "`WORKFLOW_ID` (default subagent-<childId>)")
	fs.StringVar(&f.taskQueue, "task-queue", workflows.TaskQueue, "task `QUEUE` of the workers")
	fs.IntVar(&f.priority, "priority", workflows.RunPriority, "task-queue priority `N` of the run, its activities and children: 1 (highest) to 5; batches default to 4")
	fs.Var(&givenDuration{&f.timeout, &f.timeoutSet}, "timeout", "deadline `DURATION` of the run (e.g. 10m): when it passes the child ends aborted with its partial answer")
	fs.BoolVar(&f.detach, "detach", false, "print the ids once the child is published and exit")
	fs.BoolVar(&f.follow, "follow", false, "stream the partial answer (to stderr) while the run goes on")
	fs.BoolVar(&f.json, "json", false, "print one JSON object: workflowId, runId, childId, depth, stopReason, output, structured")
}

// givenDuration is a duration flag that records whether it was given, so that a given 0 can
// be refused instead of meaning "none" as the flag's absence does.
type givenDuration struct {
	d     *time.Duration
	given *bool
}

func (g *givenDuration) String() string {
	if g.d == nil || *g.d == 0 {
		return ""
	}
	return g.d.String()
}

func (g *givenDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("parse error")
	}
	*g.d, *g.given = d, true
	return nil
}

// parseInterleaved parses args with fs, allowing flags after positional arguments, and
// returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// usageError is a command line the starter refuses before contacting the server.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// rootDefaults completes the tasks of `starter run` and `starter batch` that name neither a
// parent nor a model provider: the default route.
var rootDefaults = session.Route{Provider: defaultModelProvider, Model: defaultModel}

// startOptions turns the flags and the task into the start of a StartSubagent run. The flags
// are checked here, with messages that name them; they then fill a workflows.Task, the value
// one line of a batch file decodes into, and Task.StartInput builds the run's input, as for
// every task of a batch (contract ): without --parent the run creates a root session in
// --cwd, made absolute, routed by the route flags or the default route; with --parent the
// route flags override the parent's route field by field.
func (f *runFlags) startOptions(task string) (subflow.StartOptions, error) {
	if strings.TrimSpace(task) == "" {
		return subflow.StartOptions{}, usagef("starter run: missing TASK")
	}
	if f.detach && f.follow {
		return subflow.StartOptions{}, usagef("starter run: --detach and --follow exclude each other")
	}
	if f.timeout < 0 || f.timeoutSet && f.timeout == 0 {
		return subflow.StartOptions{}, usagef("starter run: --timeout must be positive: %v (omit it for a run without a deadline)", f.timeout)
	}
	for _, v := range []struct{ name, value string }{{"TASK", task}, {"--persona", f.persona}, {"--label", f.label}} {
		if !utf8.ValidString(v.value) {
			return subflow.StartOptions{}, usagef("starter run: %s is not valid UTF-8", v.name)
		}
	}
	if err := workflows.CheckUserWorkflowID(f.id); err != nil {
		return subflow.StartOptions{}, usagef("starter run: --id: %v", err)
	}
	if f.priority < 0 || f.priority > workflows.MaxPriorityKey { // 0: the default, as in a runFlags literal
		return subflow.StartOptions{}, usagef("starter run: --priority must be 1 (highest) to %d: %d", workflows.MaxPriorityKey, f.priority)
	}
	if f.tokenBudget < 0 {
		return subflow.StartOptions{}, usagef("starter run: --token-budget must be a positive integer: %d", f.tokenBudget)
	}
	if f.maxTokens < 0 {
		return subflow.StartOptions{}, usagef("starter run: --max-tokens must be a positive integer: %d", f.maxTokens)
	}
	if f.parent != "" {
		if why := workflows.CheckSessionID(f.parent); why != "" {
			return subflow.StartOptions{}, usagef("starter run: --parent: invalid session id %q: %s", f.parent, why)
		}
	}
	t := workflows.Task{
		Provider:      f.provider,
		Task:          task,
		Parent:        f.parent,
		ModelProvider: f.modelProvider,
		Model:         f.model,
		MaxTokens:     f.maxTokens,
		TokenBudget:   f.tokenBudget,
		Persona:       f.persona,
		Allow:         f.allow,
		Deny:          f.deny,
		Label:         f.label,
	}
	if f.timeout > 0 {
		t.Timeout = f.timeout.String() // parses back to the same duration
	}
	if f.maxDepth != "" {
		// Range checks belong to the workflow, which answers with the contract's message.
		n, err := strconv.ParseInt(strings.TrimSpace(f.maxDepth), 10, 64)
		if err != nil {
			return subflow.StartOptions{}, usagef("starter run: --max-depth must be an integer: %q", f.maxDepth)
		}
		t.MaxDepth = &n
	}
	var schema json.RawMessage
	if f.schema != "" {
		raw, err := os.ReadFile(f.schema)
		if err != nil {
			return subflow.StartOptions{}, usagef("starter run: --schema: %v", err)
		}
		raw = trimBOM(raw)
		if !json.Valid(raw) {
			return subflow.StartOptions{}, usagef("starter run: --schema %s: not valid JSON", f.schema)
		}
		schema = raw
	}
	if f.cwd != "" || f.parent == "" {
		dir := f.cwd
		if dir == "" {
			dir = "."
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return subflow.StartOptions{}, usagef("starter run: --cwd %s: %v", dir, err)
		}
		t.Cwd = abs
	}
	in, err := t.StartInput("", workflows.TaskDefaults{Route: rootDefaults})
	if err != nil {
		// The flags were checked above; what is left is a bug, not a usage error.
		return subflow.StartOptions{}, fmt.Errorf("starter run: %w", err)
	}
	// The schema goes in after the conversion: the workflow answers any valid JSON that is
	// not an object-rooted schema with the contract's message, which a batch line gets up front.
	in.Request.OutputSchema = schema
	// The checks of every run (checkStart), made here so a rejection starts nothing, worded
	// with the flag that carries the bad value. A cwd absent here may exist on the worker's
	// host; one that is a file here is not a directory anywhere the starter can see.
	err = checkStart(in, true)
	var ce *startCheckError
	if errors.As(err, &ce) {
		var ve *subagent.ValidationError
		switch {
		case ce.check == checkScript:
			return subflow.StartOptions{}, usagef("starter run: --model-provider %s needs --model SCRIPT.json", model.ProviderScripted)
		case ce.check == checkCwd:
			return subflow.StartOptions{}, usagef("starter run: --cwd %s is not a directory", ce.cwd)
		case ce.check == checkSize:
			return subflow.StartOptions{}, usagef("starter run: the request is %d bytes encoded, over the %d bytes one Temporal payload can carry: shorten the task, the schema or the persona",
				ce.size, workflows.MaxStartInputBytes)
		case ce.check == checkEncode || !errors.As(ce.err, &ve):
			return subflow.StartOptions{}, fmt.Errorf("starter run: %w", ce.err)
		case ve.Rule == subagent.RuleUnsupportedSchema:
			return subflow.StartOptions{}, usagef("starter run: --schema %s: %s", f.schema, ve.Message)
		case ve.Rule == subagent.RuleInvalidMaxDepth:
			return subflow.StartOptions{}, usagef("starter run: --max-depth %s: %s", f.maxDepth, ve.Message)
		case ve.Rule == subagent.RuleInvalidLabel:
			return subflow.StartOptions{}, usagef("starter run: --label: %s", ve.Message)
		default:
			return subflow.StartOptions{}, usagef("%s", ve.Message) // the exact message, as the workflow gives it
		}
	}
	return subflow.StartOptions{WorkflowID: f.id, TaskQueue: f.taskQueue, Input: in,
		Priority: temporal.Priority{PriorityKey: f.priority}}, nil
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newUsageFlagSet("starter run", "usage: starter run [flags] TASK", stderr)
	var f runFlags
	f.register(fs)
	positional, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	opts, err := f.startOptions(strings.Join(positional, " "))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}

	c, ok := dialOrReport(ctx, stderr)
	if !ok {
		return exitError
	}
	defer c.Close()

	opts.Namespace = namespace()
	pub, wr, err := subflow.Start(ctx, c, opts)
	if err != nil {
		var ve *subagent.ValidationError
		switch {
		case errors.As(err, &ve):
			fmt.Fprintln(stderr, ve.Message)
			return exitUsage
		case temporal.IsCanceledError(err):
			fmt.Fprintf(stderr, "starter run: %v\n", err)
			return exitAborted
		default:
			fmt.Fprintf(stderr, "starter run: %v\n", err)
			return exitError
		}
	}
	wfID := wr.GetID()
	if f.detach {
		return printPublished(stdout, stderr, wfID, pub, f.json)
	}
	if !f.json {
		fmt.Fprintf(stderr, "started %s (child %s, depth %d)\n", wfID, pub.ChildID, pub.Depth)
	}
	out, err := wait(ctx, c, wr, stderr, f.follow)
	if err == nil {
		err = subflow.ResolveOutcome(context.WithoutCancel(ctx), c, f.taskQueue, &out)
	}
	if err != nil {
		return reportFailure(stderr, wfID, err)
	}
	return report(stdout, stderr, newResultJSON(wfID, wr.GetRunID(), out), f.json)
}

// printPublished prints the ids of a detached run.
func printPublished(stdout, stderr io.Writer, workflowID string, pub workflows.Published, asJSON bool) int {
	if !asJSON {
		fmt.Fprintf(stdout, "workflow %s run %s child %s depth %d\n", workflowID, pub.RunID, pub.ChildID, pub.Depth)
		return exitCompleted
	}
	err := json.NewEncoder(stdout).Encode(struct {
		WorkflowID string `json:"workflowId"`
		RunID      string `json:"runId"`
		ChildID    string `json:"childId"`
		Depth      int64  `json:"depth"`
	}{workflowID, pub.RunID, pub.ChildID, pub.Depth})
	if err != nil {
		fmt.Fprintf(stderr, "starter run: write ids: %v\n", err)
		return exitError
	}
	return exitCompleted
}

// reportFailure prints the failure of a run that has no outcome and returns its exit code:
// 2 for a rejection (its exact message), 1 otherwise.
func reportFailure(stderr io.Writer, workflowID string, err error) int {
	var ve *subagent.ValidationError
	if errors.As(err, &ve) {
		fmt.Fprintln(stderr, ve.Message)
		return exitUsage
	}
	fmt.Fprintf(stderr, "starter: %s failed: %v\n", workflowID, err)
	return exitError
}

// wait waits for the outcome of wr. With follow it streams the partial answer to live while
// the run goes on. The first interrupt (ctx done) cancels the run, which then ends with
// the aborted outcome; a second one kills the starter.
func wait(ctx context.Context, c client.Client, wr client.WorkflowRun, live io.Writer, follow bool) (workflows.Outcome, error) {
	var out workflows.Outcome
	done := make(chan error, 1)
	go func() { done <- wr.Get(context.Background(), &out) }()

	var tick <-chan time.Time
	if follow {
		t := time.NewTicker(followInterval)
		defer t.Stop()
		tick = t.C
	}
	tail := &tailFollower{w: live}
	interrupted := ctx.Done()
	for {
		select {
		case err := <-done:
			if follow && tail.shown != "" {
				fmt.Fprintln(live)
			}
			if err != nil {
				return outcomeOf(err)
			}
			return out, nil
		case <-tick:
			st, err := subflow.Describe(ctx, c, wr.GetID(), wr.GetRunID())
			if err == nil && st.Progress != nil {
				tail.update(st.Progress.Tail)
			}
		case <-interrupted:
			interrupted = nil
			tick = nil
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			fmt.Fprintf(live, "\nstarter: interrupted, cancelling %s (interrupt again to quit)\n", wr.GetID())
			if err := c.CancelWorkflow(context.Background(), wr.GetID(), wr.GetRunID()); err != nil {
				return workflows.Outcome{}, fmt.Errorf("cancel %s: %w", wr.GetID(), err)
			}
		}
	}
}

// tailFollower prints what is new in successive tails of a growing text.
type tailFollower struct {
	w     io.Writer
	shown string
}

// update prints the part of tail that the last tail shown did not hold: tail minus its
// longest prefix that ends the last one. A tail with no overlap (more than a window
// streamed between two polls, or the output was replaced) is printed whole.
func (f *tailFollower) update(tail string) {
	if tail == "" || tail == f.shown {
		return
	}
	k := overlap(f.shown, tail)
	fmt.Fprint(f.w, tail[k:])
	f.shown = tail
}

// overlap returns the length of the longest prefix of tail that is a suffix of shown.
func overlap(shown, tail string) int {
	for k := min(len(shown), len(tail)); k > 0; k-- {
		if strings.HasSuffix(shown, tail[:k]) {
			return k
		}
	}
	return 0
}
