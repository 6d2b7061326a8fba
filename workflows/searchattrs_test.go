package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLabelAttribute: the SubagentLabel value has none of the characters a PostgreSQL
// tsvector literal treats as syntax, and keeps the rest of the label.
func TestLabelAttribute(t *testing.T) {
	assert.Equal(t, "demo  spawn", LabelAttribute("demo: spawn"))
	assert.Equal(t, "it s a b c", LabelAttribute(`it's a\b:c`))
	assert.Equal(t, "part 3 — ünïcode", LabelAttribute("part 3 — ünïcode"))
}
