package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
)

// Search attributes of StartSubagent (contract R-75). They must be registered on the namespace
// (devserver does it; elsewhere see SearchAttributes) or the workflow's upserts fail.
var (
	AttrProvider   = temporal.NewSearchAttributeKeyKeyword("SubagentProvider")
	AttrModel      = temporal.NewSearchAttributeKeyKeyword("SubagentModel")
	AttrParent     = temporal.NewSearchAttributeKeyKeyword("SubagentParent")
	AttrChild      = temporal.NewSearchAttributeKeyKeyword("SubagentChild")
	AttrStopReason = temporal.NewSearchAttributeKeyKeyword("SubagentStopReason")
	AttrBatch      = temporal.NewSearchAttributeKeyKeyword("SubagentBatch")
	AttrDepth      = temporal.NewSearchAttributeKeyInt64("SubagentDepth")
	AttrLabel      = temporal.NewSearchAttributeKeyString("SubagentLabel") // Text
	// AttrRetryOf is set on a Batch started by `starter batch retry`: the batch it retries.
	AttrRetryOf = temporal.NewSearchAttributeKeyKeyword("SubagentRetryOf")
	// AttrInputTokens and AttrOutputTokens are a finished run's token usage.
	AttrInputTokens  = temporal.NewSearchAttributeKeyInt64("SubagentInputTokens")
	AttrOutputTokens = temporal.NewSearchAttributeKeyInt64("SubagentOutputTokens")
)

// SearchAttributes lists every key above, for registration: each key's GetName and
// GetValueType give what `temporal operator search-attribute create --name N --type T`
// needs (7 Keyword, 3 Int, 1 Text: within SQL visibility's limits of 10, 3 and 3 per
// namespace — the Int ones are all taken).
var SearchAttributes = []temporal.SearchAttributeKey{
	AttrProvider, AttrModel, AttrParent, AttrChild, AttrStopReason, AttrBatch, AttrDepth, AttrLabel,
	AttrRetryOf, AttrInputTokens, AttrOutputTokens,
}

// LabelAttribute is the value of SubagentLabel for a run labelled label: the label with
// ':', "'" and '\' as spaces. PostgreSQL's SQL visibility casts a Text attribute to a
// tsvector literal, in which those characters are syntax, and a value it cannot parse fails
// the run's whole visibility row, so the run would never be listed (docs/temporal.md). The
// label itself is kept as given everywhere else (the request, the run's summary).
func LabelAttribute(label string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ':', '\'', '\\':
			return ' '
		}
		return r
	}, label)
}

// BatchRunsQuery is the visibility query of the StartSubagent runs that carry batch's
// SubagentBatch. Any client may set that attribute on a run of its own: a reader keeps only
// the runs whose parent is the batch.
func BatchRunsQuery(batch string) string {
	return fmt.Sprintf("SubagentBatch = %q AND WorkflowType = %q", batch, WorkflowName)
}

// BatchRunsPage is the page size in which a client lists a batch's runs with
// BatchRunsQuery. Decoding a listed run allocates about 14 KB, and a decoded page stays live
// until the next is asked for: with pages of 1,000 a reader's peak grew with the batch's
// count of pages (the starter 1.22 × at 100,000 tasks against 1,000; 1.15 × with pages of
// 100, in the same time).
const BatchRunsPage = 100
