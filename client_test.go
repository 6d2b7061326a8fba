package subflow

import (
	"testing"

	"github.com/stretchr/testify/assert"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

func TestStartWorkflowOptions(t *testing.T) {
	in := workflows.StartInput{
		Provider: subagent.ProviderSpawn,
		ChildID:  "child-1",
		Request: subagent.Request{
			Label:        "summarise",
			Prompt:       []session.Block{session.Text("summarise the repo")},
			Parent:       subagent.ParentRef{SessionID: "parent-1", Cwd: "/work"},
			AgentOptions: session.Route{Model: "model-a"},
		},
	}
	opts := StartWorkflowOptions(workflows.WorkflowID(in.ChildID), "", in)
	assert.Equal(t, "subagent-child-1", opts.ID)
	assert.Equal(t, workflows.TaskQueue, opts.TaskQueue)
	assert.Equal(t, enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL, opts.WorkflowIDConflictPolicy)
	assert.Equal(t, workflows.Summary(in), opts.StaticSummary)
	assert.Equal(t, workflows.Details(in), opts.StaticDetails)
	provider, _ := opts.TypedSearchAttributes.GetKeyword(workflows.AttrProvider)
	label, _ := opts.TypedSearchAttributes.GetString(workflows.AttrLabel)
	assert.Equal(t, "spawn", provider)
	assert.Equal(t, "summarise", label)
	assert.Equal(t, "q2", StartWorkflowOptions("id", "q2", in).TaskQueue)
}
