package activities_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/workflows"
)

// listing is every path under dir, directories included, with each file's size.
func listing(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = info.Size()
		return nil
	}))
	return out
}

// TestAChildIDNamesOneRun: the sessions a run creates record it as their owner; its retry
// finds them (TestPublishIsIdempotentForAChildID), but a Publish or CreateRootSession of
// another run naming them — or a session no run owns — is refused with child-id-taken before
// anything is written, and a missing parent before any owner is recorded.
func TestAChildIDNamesOneRun(t *testing.T) {
	f := newFixture(t)
	e := newEnv(t, f.activities(), worker.Options{})
	ctx := context.Background()

	mine := publish(t, e, "mine", request("hello"))
	hd, _, err := f.store.Load(ctx, mine.ChildID)
	require.NoError(t, err)
	require.NotEmpty(t, hd.Owner, "the run that created the child is recorded")

	victim := session.Header{ID: "victim", Cwd: f.cwd, ParentSession: parentID, Origin: session.OriginSubagent,
		DelegationDepth: 1, Route: &session.Route{Provider: model.ProviderScripted, Model: "script.json"}, Owner: "other-workflow/other-run"}
	require.NoError(t, f.store.Create(ctx, victim))
	legacy := victim
	legacy.ID, legacy.Owner = "legacy", ""
	require.NoError(t, f.store.Create(ctx, legacy))
	root := session.Header{ID: workflows.RootSessionID("victim"), Cwd: f.cwd, Owner: "other-workflow/other-run"}
	require.NoError(t, f.store.Create(ctx, root))
	before := listing(t, f.root)

	for _, tc := range []struct{ child, msg string }{
		{"victim", `subagent childId "victim" is taken: its session was created by workflow other-workflow/other-run; choose another childId`},
		{"legacy", `subagent childId "legacy" is taken: its session was created by another run; choose another childId`},
	} {
		_, err := e.ExecuteActivity(workflows.ActivityPublish, workflows.ChildInput{Provider: "spawn", ChildID: tc.child, Request: request("take it")})
		appErr := requireApplicationError(t, err)
		assert.True(t, appErr.NonRetryable())
		assert.Equal(t, workflows.RuleChildIDTaken, appErr.Type())
		assert.Equal(t, tc.msg, appErr.Message())
	}
	_, err = e.ExecuteActivity(workflows.ActivityCreateRootSession, workflows.CreateRootSessionInput{
		SessionID: root.ID, ChildID: "victim", Root: workflows.RootSession{Cwd: f.cwd},
	})
	appErr := requireApplicationError(t, err)
	assert.Equal(t, workflows.RuleChildIDTaken, appErr.Type())
	assert.Equal(t, `subagent childId "victim" is taken: its root session `+root.ID+` was created by workflow other-workflow/other-run; choose another childId`, appErr.Message())

	req := request("orphan")
	req.Parent.SessionID = "no-such-session"
	_, err = e.ExecuteActivity(workflows.ActivityPublish, workflows.ChildInput{Provider: "spawn", ChildID: "orphan", Request: req})
	appErr = requireApplicationError(t, err)
	assert.Equal(t, workflows.RuleParentNotFound, appErr.Type())
	assert.Equal(t, before, listing(t, f.root), "nothing written: no owner record, no session")
}

// TestAResetRunFindsItsSessions: after a Temporal reset the run has a new run id but the same
// workflow id and first run id, which the workflow names as the owner (workflows.RunOwner):
// its Publish and CreateRootSession find the sessions it created before the reset, while a
// start under the same workflow id with a chain of its own is still refused.
func TestAResetRunFindsItsSessions(t *testing.T) {
	f := newFixture(t)
	e := newEnv(t, f.activities(), worker.Options{})
	ctx := context.Background()
	const owner = "subagent-c1/first-run"
	mine := session.Header{ID: "c1", Cwd: f.cwd, ParentSession: parentID, Origin: session.OriginSubagent,
		DelegationDepth: 1, Route: &session.Route{Provider: model.ProviderScripted, Model: "script.json"}, Owner: owner}
	require.NoError(t, f.store.Create(ctx, mine))
	root := session.Header{ID: workflows.RootSessionID("c1"), Cwd: f.cwd, Owner: owner}
	require.NoError(t, f.store.Create(ctx, root))

	_, err := e.ExecuteActivity(workflows.ActivityPublish, workflows.ChildInput{
		Provider: "spawn", ChildID: "c1", Request: request("again"), Owner: owner})
	require.NoError(t, err, "the reset run's Publish finds its own child")
	_, err = e.ExecuteActivity(workflows.ActivityCreateRootSession, workflows.CreateRootSessionInput{
		SessionID: root.ID, ChildID: "c1", Root: workflows.RootSession{Cwd: f.cwd}, Owner: owner})
	require.NoError(t, err, "and its own root")

	_, err = e.ExecuteActivity(workflows.ActivityPublish, workflows.ChildInput{
		Provider: "spawn", ChildID: "c1", Request: request("take it"), Owner: "subagent-c1/another-chain"})
	appErr := requireApplicationError(t, err)
	assert.Equal(t, workflows.RuleChildIDTaken, appErr.Type(), "a new start under the same workflow id")
}
