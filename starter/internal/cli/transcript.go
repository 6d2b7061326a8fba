package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/storeopen"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// envSessionStore names the session store `starter transcript` reads directly when
// --session-root is not given (the worker's variable of the same name).
const envSessionStore = "SUBFLOW_SESSION_STORE"

// transcriptJSON is the --json object of `starter transcript`.
type transcriptJSON struct {
	WorkflowID string              `json:"workflowId"`
	Provider   string              `json:"provider"`
	StopReason subagent.StopReason `json:"stopReason,omitempty"`
	subagent.Transcript
}

// runTranscript prints the transcript of a run's child (docs/cli.md): from the session store
// when the starter reaches it (--session-root or $SUBFLOW_SESSION_STORE) and holds the run's
// session, else through a worker of the run's task queue (FetchTranscript).
func runTranscript(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newUsageFlagSet("starter transcript",
		"usage: starter transcript [--json] [--full] [--session-root STORE] ID\n       starter transcript [flags] --task N|--label L BATCH_ID", stderr)
	asJSON := fs.Bool("json", false, "print the transcript as one JSON object")
	full := fs.Bool("full", false, fmt.Sprintf("print texts, tool inputs and results whole (default: cut at %d bytes each)", subagent.DefaultTranscriptCut))
	task := fs.Int("task", -1, "the run of task `N` (0-based) of batch ID")
	label := fs.String("label", "", "the run of the task labelled `L` of batch ID")
	root := fs.String("session-root", "", "read the session store `STORE` (a directory or a postgres:// URL) directly (default $"+envSessionStore+"; else through a worker)")
	c, id, code, ok := dialID(ctx, fs, args, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "starter transcript: %v\n", err)
		return exitError
	}
	if *task >= 0 || *label != "" {
		var err error
		if id, err = batchTaskRun(ctx, c, id, *task, *label); err != nil {
			return fail(err)
		}
	}
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return fail(fmt.Errorf("%s: %w", id, err))
	}
	st, err := subflow.Describe(ctx, c, id, "")
	if err != nil {
		return fail(err)
	}
	if st.ChildID == "" {
		return fail(fmt.Errorf("run %s has no child: it is %s", id, st.Phase))
	}
	in := workflows.TranscriptInput{ChildID: st.ChildID, Provider: st.Provider, Full: *full}
	tr, missing, err := readTranscript(ctx, c, desc, in, cmp.Or(*root, os.Getenv(envSessionStore)))
	switch {
	case err != nil:
		return fail(err)
	case missing:
		return fail(removedSession(id, in, desc))
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(transcriptJSON{WorkflowID: id, Provider: st.Provider, StopReason: st.StopReason, Transcript: *tr}); err != nil {
			return fail(err)
		}
		return exitCompleted
	}
	printTranscript(stdout, id, st, tr)
	return exitCompleted
}

// readTranscript reads the transcript from the store spec names when it is set, opens and
// holds the run's session, else through a worker of the run's task queue.
func readTranscript(ctx context.Context, c client.Client, desc *workflowservice.DescribeWorkflowExecutionResponse,
	in workflows.TranscriptInput, spec string) (*subagent.Transcript, bool, error) {
	if spec != "" && !subagent.IsRemote(in.Provider) {
		if s, err := storeopen.Open(ctx, spec); err == nil {
			hd, events, err := s.Load(ctx, in.ChildID)
			_ = s.Close()
			if err == nil {
				cut := subagent.DefaultTranscriptCut
				if in.Full {
					cut = 0
				}
				tr := subagent.BuildTranscript(in.ChildID, events[min(hd.SeedLength, int64(len(events))):], cut)
				return &tr, false, nil
			}
			if !errors.Is(err, session.ErrNotFound) {
				return nil, false, fmt.Errorf("read session %s from %s: %w", in.ChildID, storeopen.Describe(spec), err)
			}
		}
		// Not this store's, or no store here: the workers' store may hold it.
	}
	return subflow.FetchTranscript(ctx, c, desc.GetExecutionConfig().GetTaskQueue().GetName(), in)
}

// removedSession is the error of a run whose session the store no longer holds.
func removedSession(id string, in workflows.TranscriptInput, desc *workflowservice.DescribeWorkflowExecutionResponse) error {
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetCloseTime() == nil {
		return fmt.Errorf("run %s: the session store holds no session %s", id, in.ChildID)
	}
	return fmt.Errorf("run %s: session %s was removed from the session store: the run closed on %s, and the retention cleanup removes what a closed run stored once it is past the retention (docs/durability.md)",
		id, in.ChildID, info.GetCloseTime().AsTime().UTC().Format(time.RFC3339))
}

// batchTaskRun returns the workflow id of the run of task n (n ≥ 0) or of the task labelled
// label of batch. Only runs whose parent is the batch count: its search attribute and a task
// number in the memo are what any client may set on a run of its own.
func batchTaskRun(ctx context.Context, c client.Client, batch string, n int, label string) (string, error) {
	ofBatch := func(info *workflowpb.WorkflowExecutionInfo) bool {
		return info.GetParentExecution().GetWorkflowId() == batch
	}
	if label == "" {
		id := workflows.BatchChildWorkflowID(batch, n)
		if desc, err := c.DescribeWorkflowExecution(ctx, id, ""); err == nil && ofBatch(desc.GetWorkflowExecutionInfo()) {
			return id, nil
		}
	}
	query := workflows.BatchRunsQuery(batch)
	if label != "" {
		query += fmt.Sprintf(" AND SubagentLabel = %q", workflows.LabelAttribute(label))
	}
	var found []string
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: workflows.BatchRunsPage, NextPageToken: token})
		if err != nil {
			return "", fmt.Errorf("list the runs of batch %s: %w", batch, err)
		}
		for _, info := range resp.GetExecutions() {
			if !ofBatch(info) {
				continue
			}
			id := info.GetExecution().GetWorkflowId()
			if label == "" {
				var idx int
				if p := info.GetMemo().GetFields()[workflows.MemoBatchIndex]; p != nil && json.Unmarshal(p.GetData(), &idx) == nil && idx == n {
					found = append(found, id)
				}
				continue
			}
			// The label attribute is text: its match is by words, so check the label itself.
			if st, err := subflow.Describe(ctx, c, id, ""); err == nil && st.Label == label {
				found = append(found, id)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	what := fmt.Sprintf("task %d", n)
	if label != "" {
		what = fmt.Sprintf("the task labelled %q", label)
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("batch %s has no run of %s", batch, what)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("batch %s has %d runs of %s: %s; name one by its workflow id", batch, len(found), what, strings.Join(found, ", "))
}

// printTranscript prints tr in order, one entry a paragraph.
func printTranscript(w io.Writer, id string, st workflows.Status, tr *subagent.Transcript) {
	fmt.Fprintf(w, "run       %s\nchild     %s (%s)\n", id, st.ChildID, st.Provider)
	if tr.Cut > 0 {
		fmt.Fprintf(w, "cut       texts, inputs and results at %d bytes (--full prints them whole)\n", tr.Cut)
	}
	for _, e := range tr.Entries {
		more := ""
		if e.CutBytes > 0 {
			more = fmt.Sprintf(" [%d bytes cut]", e.CutBytes)
		}
		switch e.Kind {
		case subagent.EntryPrompt:
			fmt.Fprintf(w, "\n[prompt]\n%s%s\n", e.Text, more)
		case subagent.EntryStep:
			fmt.Fprintf(w, "\n[step %d]\n", e.Step)
		case subagent.EntryText:
			if e.Text != "" || more != "" {
				fmt.Fprintf(w, "assistant: %s%s\n", e.Text, more)
			}
			fmt.Fprintf(w, "tokens: %d in, %d out\n", e.InputTokens, e.OutputTokens)
		case subagent.EntryToolCall:
			fmt.Fprintf(w, "→ %s %s%s\n", e.Tool, e.Input, more)
		case subagent.EntryToolResult:
			result := "ok"
			if e.IsError {
				result = "error"
			}
			fmt.Fprintf(w, "← %s %s: %s%s\n", e.Tool, result, e.Text, more)
		case subagent.EntryTurnEnd:
			fmt.Fprintf(w, "\n[turn end] %s", e.End)
			if e.Cause != "" {
				fmt.Fprintf(w, " (cause %s)", e.Cause)
			}
			if e.Text != "" {
				fmt.Fprintf(w, ": %s", e.Text)
			}
			fmt.Fprintln(w)
		}
	}
	if st.StopReason != "" {
		fmt.Fprintf(w, "stop      %s\n", st.StopReason)
	}
	fmt.Fprintf(w, "tokens    %d in, %d out\n", tr.InputTokens, tr.OutputTokens)
}
