package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/workflows"
)

// treeNode is one run of a delegation tree, as `starter status --tree` prints it.
type treeNode struct {
	WorkflowID string `json:"workflowId"`
	Provider   string `json:"provider,omitempty"`
	Depth      int64  `json:"depth"`
	// Phase is the phase of a running run (its status query); StopReason the stop reason of
	// a finished one. Status is the Temporal execution status (Running, Completed, Canceled…).
	Phase      string      `json:"phase,omitempty"`
	StopReason string      `json:"stopReason,omitempty"`
	Status     string      `json:"status"`
	Label      string      `json:"label,omitempty"`
	Children   []*treeNode `json:"children,omitempty"`
}

// maxTreeRuns bounds the runs a tree lists, so a runaway fan-out cannot make status hang.
const maxTreeRuns = 10000

// delegationTree returns the tree of runs below workflowID: the runs whose SubagentParent
// is a run's child session, found through visibility (eventually consistent: a run started
// a moment ago may be missing), level by level.
func delegationTree(ctx context.Context, c client.Client, workflowID string) (*treeNode, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", workflowID, err)
	}
	root, child := newTreeNode(desc.GetWorkflowExecutionInfo())
	if err := fillPhase(ctx, c, root); err != nil {
		return nil, err
	}
	type pending struct {
		node  *treeNode
		child string
	}
	level := []pending{{root, child}}
	runs := 1
	for len(level) > 0 && runs < maxTreeRuns {
		var next []pending
		for _, p := range level {
			if p.child == "" {
				continue
			}
			infos, err := listRuns(ctx, c, fmt.Sprintf("%s = '%s'", workflows.AttrParent.GetName(), p.child))
			if err != nil {
				return nil, err
			}
			for _, info := range infos {
				n, child := newTreeNode(info)
				if err := fillPhase(ctx, c, n); err != nil {
					return nil, err
				}
				p.node.Children = append(p.node.Children, n)
				next = append(next, pending{n, child})
				runs++
			}
		}
		level = next
	}
	return root, nil
}

// listRuns returns every execution query lists.
func listRuns(ctx context.Context, c client.Client, query string) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var out []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list %q: %w", query, err)
		}
		out = append(out, resp.GetExecutions()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// newTreeNode reads a node from a run's visibility record; child is its child session id.
func newTreeNode(info *workflowpb.WorkflowExecutionInfo) (n *treeNode, child string) {
	fields := info.GetSearchAttributes().GetIndexedFields()
	str := func(name string) string {
		var v string
		if p, ok := fields[name]; ok {
			_ = converter.GetDefaultDataConverter().FromPayload(p, &v)
		}
		return v
	}
	n = &treeNode{
		WorkflowID: info.GetExecution().GetWorkflowId(),
		Provider:   str(workflows.AttrProvider.GetName()),
		StopReason: str(workflows.AttrStopReason.GetName()),
		Label:      str(workflows.AttrLabel.GetName()),
		Status:     displayStatus(info.GetStatus()),
	}
	if p, ok := fields[workflows.AttrDepth.GetName()]; ok {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &n.Depth)
	}
	return n, str(workflows.AttrChild.GetName())
}

// fillPhase asks a running run for its phase.
func fillPhase(ctx context.Context, c client.Client, n *treeNode) error {
	if n.Status != displayStatus(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING) {
		return nil
	}
	st, err := subflow.Describe(ctx, c, n.WorkflowID, "")
	if err != nil {
		return err
	}
	n.Phase = string(st.Phase)
	if n.Depth == 0 {
		n.Depth = st.Depth
	}
	return nil
}

// displayStatus is "Running", "Completed", "Canceled"… as the Web UI shows them.
func displayStatus(s enumspb.WorkflowExecutionStatus) string {
	name := strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_")
	if name == "" {
		return ""
	}
	return name[:1] + strings.ToLower(name[1:])
}

// printTree prints one line per run, indented by its place in the tree:
// workflow id, provider, depth, phase (running) or stop reason (else), label.
func printTree(w io.Writer, n *treeNode, indent string) {
	state := n.Phase
	if state == "" {
		state = n.StopReason
	}
	if state == "" || n.Status != "Running" && n.Status != "Completed" {
		state = strings.TrimSpace(state + " " + strings.ToLower(n.Status))
	}
	line := fmt.Sprintf("%s%s  %s  depth %d  %s", indent, n.WorkflowID, n.Provider, n.Depth, state)
	if n.Label != "" {
		line += "  " + n.Label
	}
	fmt.Fprintln(w, line)
	for _, c := range n.Children {
		printTree(w, c, indent+"  ")
	}
}
