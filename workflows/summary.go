package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
)

// summaryPromptLimit bounds the prompt excerpt of summaries, in runes.
const summaryPromptLimit = 60

// detailsPromptLimit bounds the prompt excerpt of details, in runes.
const detailsPromptLimit = 500

// WorkflowID returns the conventional workflow id of the run of child childID:
// "subagent-<childId>".
func WorkflowID(childID string) string { return "subagent-" + childID }

// StartMetadata is what the start options of a StartSubagent run say about it, the same
// whoever starts it (subflow.Start, a batch's children, nested delegations, ExecuteSubagent):
// the UI's summary and details and the search attributes known at start.
type StartMetadata struct {
	Summary          string                    // StaticSummary: Summary(in)
	Details          string                    // StaticDetails: Details(in)
	SearchAttributes temporal.SearchAttributes // TypedSearchAttributes: StartAttributes(in)
}

// StartMetadataOf returns the StartMetadata of a run of in; extra search attributes the
// starter knows besides (a nested child's depth) are set after StartAttributes(in).
func StartMetadataOf(in StartInput, extra ...temporal.SearchAttributeUpdate) StartMetadata {
	return StartMetadata{
		Summary:          Summary(in),
		Details:          Details(in),
		SearchAttributes: temporal.NewSearchAttributes(append(StartAttributes(in), extra...)...),
	}
}

// Summary returns the one-line StaticSummary of a run, as the Temporal UI lists it:
// "<provider> child of <parent>: <label>", the label falling back to the start of the
// prompt.
func Summary(in StartInput) string {
	parent := in.Request.Parent.SessionID
	if parent == "" {
		parent = "a new root session"
	}
	s := fmt.Sprintf("%s child of %s", in.Provider, parent)
	if what := in.Request.Label; what != "" {
		return s + ": " + what
	}
	if what := excerpt(session.JoinText(in.Request.Prompt), summaryPromptLimit); what != "" {
		return s + ": " + what
	}
	return s
}

// Details returns the StaticDetails of a run (Markdown): provider, parent, model, the
// optional request fields that are set, and the start of the prompt.
func Details(in StartInput) string {
	var b strings.Builder
	line := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "**%s**: %s  \n", name, value)
		}
	}
	r := in.Request
	line("provider", in.Provider)
	line("label", r.Label)
	line("parent", r.Parent.SessionID)
	if in.isRoot() {
		line("root cwd", in.Cwd())
	}
	line("model", model(in))
	if r.MaxDepth != nil {
		line("maxDepth", fmt.Sprint(*r.MaxDepth))
	}
	if r.HasOutputSchema() {
		line("structured output", "yes")
	}
	if r.ToolFilter != nil {
		line("tools allowed", strings.Join(r.ToolFilter.Allow, ", "))
		line("tools denied", strings.Join(r.ToolFilter.Deny, ", "))
	}
	if r.Persona != "" {
		line("persona", "set")
	}
	line("batch", in.Batch)
	if p := excerpt(session.JoinText(r.Prompt), detailsPromptLimit); p != "" {
		fmt.Fprintf(&b, "\n%s\n", p)
	}
	return b.String()
}

// model is the model a run asks for: the request's, else the root route's.
func model(in StartInput) string { return in.Route().Model }

// excerpt returns the first limit runes of s on one line, with "…" when cut.
func excerpt(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > limit {
		return string(r[:limit]) + "…"
	}
	return s
}
