package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// TestAdmissionRequestsPerMinute: with a cap of 2 requests a minute and room for 10 at once,
// three acquires sent together get two permits at once and the third a minute later.
func TestAdmissionRequestsPerMinute(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	start := env.Now()
	granted := map[string]time.Duration{}
	env.RegisterDelayedCallback(func() {
		for i := range 3 {
			id := fmt.Sprintf("acquire-%d", i)
			env.UpdateWorkflow(UpdateAcquire, id, &testsuite.TestUpdateCallback{
				OnAccept: func() {},
				OnReject: func(err error) { t.Errorf("%s rejected: %v", id, err) },
				OnComplete: func(_ any, err error) {
					assert.NoError(t, err, id)
					granted[id] = env.Now().Sub(start)
				},
			})
		}
	}, 0)
	env.RegisterDelayedCallback(env.CancelWorkflow, 5*time.Minute)
	env.ExecuteWorkflow(ModelAdmission, AdmissionInput{Provider: "p", Limit: 10, RequestsPerMinute: 2})
	require.True(t, env.IsWorkflowCompleted())
	require.Len(t, granted, 3)
	assert.Less(t, granted["acquire-0"], time.Second)
	assert.Less(t, granted["acquire-1"], time.Second)
	assert.GreaterOrEqual(t, granted["acquire-2"], time.Minute, "the third waits for the minute to pass")
	assert.Less(t, granted["acquire-2"], 2*time.Minute)
}

// acquire sends an acquire update from the test environment's loop and records when it was
// granted, relative to start, under its id.
func acquire(t *testing.T, env *testsuite.TestWorkflowEnvironment, start time.Time, granted map[string]time.Duration, id string) {
	env.UpdateWorkflow(UpdateAcquire, id, &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { t.Errorf("%s rejected: %v", id, err) },
		OnComplete: func(v any, err error) {
			assert.NoError(t, err, id)
			assert.Equal(t, id, v, "the permit's id is the update's")
			granted[id] = env.Now().Sub(start)
		},
	})
}

// TestAdmissionLimitsThePermitsOut: with a limit of 2, a third acquire waits until a permit
// is released, and is then granted first come first served.
func TestAdmissionLimitsThePermitsOut(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	start := env.Now()
	granted := map[string]time.Duration{}
	env.RegisterDelayedCallback(func() {
		for _, id := range []string{"a", "b", "c", "d"} {
			acquire(t, env, start, granted, id)
		}
	}, 0)
	var during map[string]int
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryProgress)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
		env.SignalWorkflow(SignalRelease, "a")
	}, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalRelease, "unknown") }, 2*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 3*time.Minute)
	env.ExecuteWorkflow(ModelAdmission, AdmissionInput{Provider: "p", Limit: 2})
	require.True(t, env.IsWorkflowCompleted())

	assert.Equal(t, map[string]int{"limit": 2, "out": 2, "waiting": 2, "requestsPerMinute": 0}, during)
	require.Len(t, granted, 3, "d waits: c took the released permit, an unknown release frees none")
	assert.Less(t, granted["a"], time.Second)
	assert.Less(t, granted["b"], time.Second)
	assert.Equal(t, time.Minute, granted["c"], "granted at the release")
}

// TestAdmissionPermitExpires: a permit never released (its worker died) is freed after its
// TTL, so the limit does not shrink for good.
func TestAdmissionPermitExpires(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	start := env.Now()
	granted := map[string]time.Duration{}
	env.RegisterDelayedCallback(func() {
		acquire(t, env, start, granted, "lost")
		acquire(t, env, start, granted, "next")
	}, 0)
	env.RegisterDelayedCallback(env.CancelWorkflow, 30*time.Minute)
	env.ExecuteWorkflow(ModelAdmission, AdmissionInput{Provider: "p", Limit: 1, PermitTTL: 8 * time.Minute})
	require.True(t, env.IsWorkflowCompleted())

	require.Len(t, granted, 2)
	assert.Greater(t, granted["next"], 8*time.Minute, "not before the TTL")
	assert.LessOrEqual(t, granted["next"], 10*time.Minute, "within a quarter TTL after it")
}

// TestAdmissionContinuesAsNewCarryingPermits: when the server suggests it, the admission
// continues as new with the permits still out, so their holders keep them.
func TestAdmissionContinuesAsNewCarryingPermits(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	granted := map[string]time.Duration{}
	env.RegisterDelayedCallback(func() { acquire(t, env, env.Now(), granted, "held") }, 0)
	env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, time.Second)
	env.ExecuteWorkflow(ModelAdmission, AdmissionInput{Provider: "p", Limit: 3, RequestsPerMinute: 60})
	require.True(t, env.IsWorkflowCompleted())

	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	assert.Equal(t, AdmissionWorkflowName, can.WorkflowType.Name)
	var next AdmissionInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, "p", next.Provider)
	assert.Equal(t, 3, next.Limit)
	assert.Equal(t, 60, next.RequestsPerMinute)
	require.Contains(t, next.Permits, "held")
	assert.Len(t, next.Granted, 1, "the grants of the last minute still count against the rate")
}

// TestAdmissionRejectsALimitBelowOne: an admission that could grant nothing fails at once.
func TestAdmissionRejectsALimitBelowOne(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.ExecuteWorkflow(ModelAdmission, AdmissionInput{Provider: "p", Limit: 0})
	require.True(t, env.IsWorkflowCompleted())
	require.ErrorContains(t, env.GetWorkflowError(), "admission p: limit must be at least 1: 0")
}
