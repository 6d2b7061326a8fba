package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Task-queue priorities (temporal.Priority.PriorityKey: 1 is the highest, 5 the lowest of
// the server's default range, and a task without one counts as 3). A run started on its own
// (`starter run`, subflow.Start) goes ahead of a batch's tasks queued on the same task queue,
// so a person's delegation does not wait behind thousands of batch tasks; the subflow
// workflows started without one (admission, cleanup) sit between the two. A run's children
// and activities inherit its priority, a batch's children theirs from the batch (the server
// merges a child's or an activity's own priority over its workflow's).
const (
	RunPriority   = 2
	BatchPriority = 4
	// MaxPriorityKey is the lowest priority of the server's default range
	// (matching.priorityLevels).
	MaxPriorityKey = 5
	// MaxFairnessKeyBytes is the server's limit on a fairness key.
	MaxFairnessKeyBytes = 64
	// MinFairnessWeight and MaxFairnessWeight bound a fairness weight, as the server clamps it.
	MinFairnessWeight = 0.001
	MaxFairnessWeight = 1000
)

// Interactive reports whether a run at priority p is a person's: priority key 1 or
// RunPriority (a run started on its own, and the nested runs it starts, which inherit it). On
// a worker that serves the interactive lane (RegisterOptions.InteractiveLane) its drives run
// there, on activity slots no batch task takes. A run with no priority key (the server's
// default, 3: a start by type name that sets none) and a batch's task are not.
func Interactive(p temporal.Priority) bool {
	return p.PriorityKey >= 1 && p.PriorityKey <= RunPriority
}

// interactivePrefix marks an interactive lane (InteractiveQueue). A prefix, not a suffix: a
// suffix could make the lane of one workspace queue (subflow.WorkspaceQueue) the name of
// another's.
const interactivePrefix = "interactive:"

// InteractiveQueue is the interactive lane of task queue queue, which worker/app's workers
// poll beside queue with pollers and activity slots of their own
// (app.Options.InteractiveActivities): subflow.Start starts an interactive run there when
// the workers the lane routes to poll it, so none of its tasks waits behind a batch's; a run
// started on queue itself sends only its drives there.
func InteractiveQueue(queue string) string {
	return interactivePrefix + queue
}

// IsInteractiveQueue reports whether queue is an interactive lane (InteractiveQueue).
func IsInteractiveQueue(queue string) bool {
	return strings.HasPrefix(queue, interactivePrefix)
}

// BatchPriorityOf is the priority a batch runs at: key (BatchPriority when 0), with the batch's
// tasks under fairness key fairnessKey (the batch's id when empty) weighing weight (the
// server's default, 1, when 0): batches sharing workers progress in proportion to their
// weights when the server runs fairness (docs/deployment.md).
func BatchPriorityOf(batchID string, key int, fairnessKey string, weight float32) temporal.Priority {
	if key == 0 {
		key = BatchPriority
	}
	if fairnessKey == "" {
		fairnessKey = batchID
	}
	return temporal.Priority{PriorityKey: key, FairnessKey: fairnessKey, FairnessWeight: weight}
}

// CheckPriority refuses what the server would: a priority key outside 0 (the default) …
// MaxPriorityKey, a fairness key over MaxFairnessKeyBytes, a weight that is neither 0 (the
// default) nor in MinFairnessWeight … MaxFairnessWeight.
func CheckPriority(p temporal.Priority) error {
	switch {
	case p.PriorityKey < 0 || p.PriorityKey > MaxPriorityKey:
		return fmt.Errorf("priority %d is not 1 (highest) to %d (lowest)", p.PriorityKey, MaxPriorityKey)
	case len(p.FairnessKey) > MaxFairnessKeyBytes:
		return fmt.Errorf("fairness key of %d bytes is over the limit of %d", len(p.FairnessKey), MaxFairnessKeyBytes)
	case p.FairnessWeight != 0 && (p.FairnessWeight < MinFairnessWeight || p.FairnessWeight > MaxFairnessWeight):
		return fmt.Errorf("weight %g is not %g to %g", p.FairnessWeight, MinFairnessWeight, float32(MaxFairnessWeight))
	}
	return nil
}

// Priority is a run's task-queue priority and fairness as its status and a batch's summary
// show them: what it was started with, or inherited from the workflow that started it.
type Priority struct {
	// PriorityKey is 1 (highest) … MaxPriorityKey; 0 when the run has none (the server's
	// default, 3).
	PriorityKey int `json:"priorityKey,omitempty"`
	// FairnessKey groups tasks for fairness; a batch's is its id unless set.
	FairnessKey string `json:"fairnessKey,omitempty"`
	// FairnessWeight is the key's share; 0 means the server's default, 1.
	FairnessWeight float32 `json:"fairnessWeight,omitempty"`
}

// priorityOf is the Priority of the running workflow, nil when it has none.
func priorityOf(ctx workflow.Context) *Priority {
	p := workflow.GetInfo(ctx).Priority
	if p == (temporal.Priority{}) {
		return nil
	}
	return &Priority{PriorityKey: p.PriorityKey, FairnessKey: p.FairnessKey, FairnessWeight: p.FairnessWeight}
}

// String is the priority as `starter status` prints it: "2", "4, fairness key K, weight 3";
// empty for nil.
func (p *Priority) String() string {
	if p == nil {
		return ""
	}
	s := "default"
	if p.PriorityKey != 0 {
		s = fmt.Sprint(p.PriorityKey)
	}
	if p.FairnessKey != "" {
		s += ", fairness key " + p.FairnessKey
	}
	if p.FairnessWeight != 0 {
		s += fmt.Sprintf(", weight %g", p.FairnessWeight)
	}
	return s
}
