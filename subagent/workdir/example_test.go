package workdir_test

import (
	"fmt"

	"github.com/subflow-dev/subflow/subagent/workdir"
)

// ExampleResolve: with no configured cwd the child works in its parent session's; a relative
// one is refused with the contract's message.
func ExampleResolve() {
	fmt.Println(workdir.Resolve(workdir.Options{Prefix: "subagent-dsh-sdk", ParentCwd: "/"}))
	fmt.Println(workdir.Resolve(workdir.Options{Prefix: "subagent-dsh-sdk", ParentCwd: "work"}))
	// Output:
	// / <nil>
	//  subagent-dsh-sdk: parent session cwd must be an absolute path: work
}
