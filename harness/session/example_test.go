package session_test

import (
	"fmt"

	"github.com/subflow-dev/subflow/harness/session"
)

// ExampleRoute_Override: a child's route is its parent's, overridden field by field by what
// the delegation asks for.
func ExampleRoute_Override() {
	parent := session.Route{Provider: "deepseek-official", Model: "deepseek-v4-flash", MaxTokens: 4096}
	child := parent.Override(session.Route{Model: "deepseek-v4-pro"})
	fmt.Printf("%+v\n", child)
	// Output: {Provider:deepseek-official Model:deepseek-v4-pro MaxTokens:4096 TokenBudget:0}
}
