package subagent

import "github.com/subflow-dev/subflow/harness/session"

// CheckRequest runs the start checks of contract R-4 that follow the provider lookup, in order:
// the capabilities the request asks for (outputSchema, depthLimit — asked for by MaxDepth —,
// toolFilter, persona), then MaxDepth, then the output schema. It needs no provider
// instance, so deterministic code (a workflow) can run it from a static capability table.
// Every failure is a *ValidationError.
func CheckRequest(providerName string, caps Capabilities, req Request) error {
	asks := []struct {
		name   string
		asked  bool
		honour bool
	}{
		{CapOutputSchema, req.HasOutputSchema(), caps.OutputSchema},
		{CapDepthLimit, req.MaxDepth != nil, caps.DepthLimit},
		{CapToolFilter, req.ToolFilter != nil, caps.ToolFilter},
		{CapPersona, req.Persona != "", caps.Persona},
	}
	for _, a := range asks {
		if a.asked && !a.honour {
			return Rejectf(RuleUnsupportedCapability,
				"subagent provider %q does not support the %q capability", providerName, a.name)
		}
	}
	if err := CheckMaxDepth(req.MaxDepth); err != nil {
		return err
	}
	if req.HasOutputSchema() {
		return CheckSchema(req.OutputSchema)
	}
	return nil
}

// CheckMaxDepth rejects a maxDepth outside [0, 2^53−1]. Nil (no cap) passes.
func CheckMaxDepth(maxDepth *int64) error {
	if maxDepth != nil && (*maxDepth < 0 || *maxDepth > session.MaxSafeInteger) {
		return Rejectf(RuleInvalidMaxDepth, "subagent maxDepth must be a non-negative safe integer")
	}
	return nil
}
