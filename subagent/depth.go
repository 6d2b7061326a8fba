package subagent

import "github.com/subflow-dev/subflow/harness/session"

// ChildDepth returns the delegation depth of a new child (contract R-5).
//
// stored is the parent header's delegationDepth (absent = 0); runtime is the parent agent's
// runtime depth, nil when absent, taken as a float so a non-integer or negative value read
// from configuration or JSON is rejected rather than truncated. The parent's depth is the
// larger of the two: a runtime depth can deepen the stored one, never lower it. The child is
// one deeper. maxDepth, when set, caps the child depth: past it ChildDepth returns a
// *DepthError. Every other failure is a *ValidationError.
func ChildDepth(stored int64, runtime *float64, maxDepth *int64) (int64, error) {
	if err := CheckMaxDepth(maxDepth); err != nil {
		return 0, err
	}
	if stored < 0 || stored > session.MaxSafeInteger {
		return 0, Rejectf(RuleInvalidStoredDepth, "session delegationDepth must be a non-negative safe integer")
	}
	parent := stored
	if runtime != nil {
		if !session.IsSafeInteger(*runtime) {
			return 0, Rejectf(RuleInvalidRuntimeDepth, "agent subagentDepth must be a non-negative safe integer")
		}
		parent = max(parent, int64(*runtime))
	}
	if parent >= session.MaxSafeInteger {
		return 0, Rejectf(RuleDepthOverflow, "subagent child depth exceeds the safe-integer range")
	}
	child := parent + 1
	if maxDepth != nil && child > *maxDepth {
		return 0, &DepthError{Attempted: child, Max: *maxDepth}
	}
	return child, nil
}
