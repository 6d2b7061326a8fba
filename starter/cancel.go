package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// runCancel cancels a run: its child is aborted and the run ends Canceled with the partial
// output (SPEC R-72). It returns once the server accepted the request; `starter result ID`
// waits for the aborted outcome.
func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("starter cancel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id, code, ok := parseID(fs, args)
	if !ok {
		return code
	}
	c, err := dial(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	defer c.Close()
	if err := c.CancelWorkflow(ctx, id, ""); err != nil {
		fmt.Fprintf(stderr, "starter cancel: %s: %v\n", id, err)
		return exitError
	}
	fmt.Fprintf(stdout, "cancel requested for %s\n", id)
	return exitCompleted
}
