package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
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
