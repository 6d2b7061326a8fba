package sdkproc_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/sdkproc"
	"github.com/subflow-dev/subflow/subagent"
)

// Example runs one turn of a child runtime process over stdio JSON-RPC: spawn, handshake,
// the prompt, the answer, then Dispose's bounded shutdown ladder. The child runtime is this
// program's own executable (a worker serves it as `worker child-runtime`); it answers with
// the scripted model from a file in the child's working directory. Without Temporal.
func Example() {
	ctx := context.Background()
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sdkproc-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		log.Fatal(err)
	}
	script := `{"responses": [{"text": "Done: the report is ready."}]}`
	if err := os.WriteFile(filepath.Join(work, "answer.json"), []byte(script), 0o644); err != nil {
		log.Fatal(err)
	}

	p, err := sdkproc.New(sdkproc.Config{
		Command:  self,
		Args:     []string{"child-runtime", "--session-root", filepath.Join(dir, "child-sessions")},
		Provider: "scripted",
		Model:    "answer.json",
	}, sdkproc.Options{})
	if err != nil {
		log.Fatal(err)
	}
	// The child works in the parent's cwd; its sessions are its own (the runtime's store).
	run, err := p.StartRun(ctx, subagent.Request{
		Prompt: []session.Block{session.Text("Write the report.")},
		Parent: subagent.ParentRef{SessionID: "parent", Cwd: work},
	}, sdkproc.RunOptions{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := run.Result(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := run.Dispose(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.StopReason)
	fmt.Println(session.JoinText(res.Output))
	fmt.Println("exited:", run.ExitState().Exited())
	// Output:
	// completed
	// Done: the report is ready.
	// exited: true
}
