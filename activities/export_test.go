package activities

import (
	"context"

	"github.com/subflow-dev/subflow/workflows"
)

// SetSignal replaces how RunSDKChild signals its workflow: the test activity environment has
// no Temporal client.
func SetSignal(a *Activities, fn func(ctx context.Context, workflowID string, pub workflows.Published) error) {
	a.signal = fn
}
