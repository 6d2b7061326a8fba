package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/workflows"
)

// runGC runs one retention cleanup now (docs/durability.md) on a worker of the task queue,
// through Temporal, and prints what it removed, or with --dry-run would remove, and its
// size. The starter needs no access to the session store.
func runGC(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("starter gc", stderr)
	dryRun := fs.Bool("dry-run", false, "remove nothing; print what would be removed")
	olderThan := fs.Duration("older-than", 0,
		"remove what runs closed more than `DURATION` ago stored (default: the worker's --retention, else the namespace's retention)")
	queue := fs.String("task-queue", workflows.TaskQueue, "task queue whose workers' session store is cleaned")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: starter gc [--dry-run] [--older-than DURATION] [--task-queue Q]")
		return exitUsage
	}
	// An --older-than given is a retention: 0 or less would not mean "use the default" (the
	// cleanup reads a zero OlderThan that way), so it is refused rather than reinterpreted.
	if isSet(fs, "older-than") && *olderThan <= 0 {
		fmt.Fprintf(stderr, "starter gc: --older-than %v: want a positive duration such as 1h or 30m; omit the flag for the worker's --retention, else the namespace's retention\n", *olderThan)
		return exitUsage
	}
	c, ok := dialOrReport(ctx, stderr)
	if !ok {
		return exitError
	}
	defer c.Close()
	res, err := subflow.RunCleanup(ctx, c, subflow.CleanupOptions{TaskQueue: *queue, OlderThan: *olderThan, DryRun: *dryRun})
	if errors.Is(err, subflow.ErrCleanupRunning) {
		fmt.Fprintf(stderr, "starter gc: %v: wait for it to end\n", err)
		return exitError
	}
	if err != nil {
		fmt.Fprintf(stderr, "starter gc: %v\n", err)
		return exitError
	}
	printCleanup(stdout, res)
	return exitCompleted
}

// printCleanup prints a cleanup's result: the retention it applied, then what it removed by
// kind, with sizes.
func printCleanup(w io.Writer, res workflows.CleanupResult) {
	if res.Cutoff.IsZero() {
		fmt.Fprintf(w, "retention is unlimited (%s): nothing is removed\n", res.Source)
		return
	}
	verb := "removed"
	if res.DryRun {
		verb = "would remove"
	}
	total := res.Total()
	fmt.Fprintf(w, "%s %d stored items, %s: what runs closed before %s (retention %v, %s) stored\n",
		verb, total.Items, size(total.Bytes), res.Cutoff.Format(time.RFC3339), res.Retention, res.Source)
	kinds := make([]string, 0, len(res.Removed))
	for k := range res.Removed {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-10s %8d  %s\n", k, res.Removed[k].Items, size(res.Removed[k].Bytes))
	}
	fmt.Fprintf(w, "checked %d, kept %d (a run Temporal keeps still owns them)\n", res.Checked, res.Kept)
}

// size formats n bytes with a binary unit.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
