package workflows

import "go.temporal.io/sdk/temporal"

// Search attributes of StartSubagent (SPEC R-75). They must be registered on the namespace
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
)

// SearchAttributes lists every key above, for registration: each key's GetName and
// GetValueType give what `temporal operator search-attribute create --name N --type T`
// needs (6 Keyword, 1 Int, 1 Text: within SQL visibility's limits).
var SearchAttributes = []temporal.SearchAttributeKey{
	AttrProvider, AttrModel, AttrParent, AttrChild, AttrStopReason, AttrBatch, AttrDepth, AttrLabel,
}
