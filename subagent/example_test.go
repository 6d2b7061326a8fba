package subagent_test

import (
	"errors"
	"fmt"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// ExampleCheckStart shows a rejection: the error's message is the contract's exact text, its
// Rule the stable name a Temporal application error carries as its type.
func ExampleCheckStart() {
	req := subagent.Request{
		Prompt: []session.Block{session.Text("Summarise the notes.")},
		Parent: subagent.ParentRef{SessionID: "parent"},
	}
	fmt.Println(subagent.CheckStart(subagent.ProviderSpawn, req))

	err := subagent.CheckStart("nope", req)
	var ve *subagent.ValidationError
	if errors.As(err, &ve) {
		fmt.Println(ve.Rule)
		fmt.Println(ve.Message)
	}
	// Output:
	// <nil>
	// unknown-provider
	// no subagent provider registered for "nope"
}
