package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/subflow-dev/subflow/harness/tools"
)

// ExampleRegistry registers a tool of one's own beside the built-in file tools; an agent's
// preset then names the tools its model is offered.
func ExampleRegistry() {
	r := &tools.Registry{}
	if err := tools.RegisterBuiltins(r); err != nil {
		log.Fatal(err)
	}
	err := r.Register(tools.Tool{
		Name:        "now",
		Description: "The time of the build.",
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, tools.Env, tools.Call) (tools.Result, error) {
			return tools.TextResult("12:00"), nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Names())
	// Output: [grep list_dir now read_file write_file]
}
