package workflows

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// cleanupEnv runs Cleanup against a fake store of n sessions, every one removable, paged by
// the fake CleanupPage as the real one pages: by id after the cursor.
func cleanupEnv(t *testing.T, n int, pages *[]CleanupPageInput) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Cleanup, workflow.RegisterOptions{Name: CleanupWorkflowName})
	cutoff := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	env.RegisterActivityWithOptions(func(_ context.Context, in CleanupCutoffInput) (CleanupCutoff, error) {
		return CleanupCutoff{Retention: in.OlderThan, Source: "older-than", Cutoff: cutoff}, nil
	}, activity.RegisterOptions{Name: ActivityCleanupCutoff})
	env.RegisterActivityWithOptions(func(_ context.Context, in CleanupPageInput) (CleanupPageOutput, error) {
		*pages = append(*pages, in)
		require.Equal(t, cutoff, in.Cutoff, "every page has the first run's cutoff")
		var out CleanupPageOutput
		from := 0
		if in.After != "" {
			_, err := fmt.Sscanf(in.After, "s%05d", &from)
			require.NoError(t, err)
			from++
		}
		to := min(from+in.Limit, n)
		out.Checked = to - from
		out.Removed = map[string]CleanupKind{"session": {Items: to - from, Bytes: int64(10 * (to - from))}}
		if to-from < in.Limit {
			out.Done = true
		} else {
			out.Next = fmt.Sprintf("s%05d", to-1)
		}
		return out, nil
	}, activity.RegisterOptions{Name: ActivityCleanupPage})
	return env
}

// TestCleanupContinuesAsNewWithItsCursor: a walk longer than CleanupPagesPerRun pages
// continues as new with its cursor, cutoff and totals, and the continued run finishes it.
func TestCleanupContinuesAsNewWithItsCursor(t *testing.T) {
	const pageSize = 2
	n := CleanupPagesPerRun*pageSize + 3
	var pages []CleanupPageInput
	env := cleanupEnv(t, n, &pages)
	env.ExecuteWorkflow(CleanupWorkflowName, CleanupInput{OlderThan: time.Minute, PageSize: pageSize})
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "continued as new: %v", env.GetWorkflowError())
	require.Len(t, pages, CleanupPagesPerRun)

	var next CleanupInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, fmt.Sprintf("s%05d", CleanupPagesPerRun*pageSize-1), next.Cursor)
	require.NotNil(t, next.Totals)
	assert.Equal(t, CleanupPagesPerRun*pageSize, next.Totals.Total().Items)
	assert.Equal(t, 1, next.Totals.Runs)

	pages = nil
	env = cleanupEnv(t, n, &pages)
	env.ExecuteWorkflow(CleanupWorkflowName, next)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res CleanupResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, n, res.Total().Items, "every session once over both runs")
	assert.Equal(t, int64(10*n), res.Total().Bytes)
	assert.Equal(t, n, res.Checked)
	assert.Equal(t, 2, res.Runs)
	assert.Equal(t, time.Minute, res.Retention)
	assert.Len(t, pages, 2, "the continued run starts at the cursor")
}

// TestCleanupInfiniteRetention: a namespace that keeps runs forever has no cutoff, and the
// cleanup lists nothing.
func TestCleanupInfiniteRetention(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Cleanup, workflow.RegisterOptions{Name: CleanupWorkflowName})
	env.RegisterActivityWithOptions(func(context.Context, CleanupCutoffInput) (CleanupCutoff, error) {
		return CleanupCutoff{Source: "namespace"}, nil
	}, activity.RegisterOptions{Name: ActivityCleanupCutoff})
	env.ExecuteWorkflow(CleanupWorkflowName, CleanupInput{})
	require.NoError(t, env.GetWorkflowError())
	var res CleanupResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.True(t, res.Cutoff.IsZero())
	assert.Zero(t, res.Total().Items)
}
