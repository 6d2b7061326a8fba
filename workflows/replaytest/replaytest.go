// Package replaytest records workflow histories and replays them, so that a change to
// deterministic workflow code that would break running workflows fails a test.
//
// Histories are recorded from a finished run, either with the CLI
//
//	temporal workflow show --workflow-id subagent-<childId> --output json > workflows/testdata/<name>.json
//
// or from a test with a connected client:
//
//	err := replaytest.WriteFile(ctx, c, workflowID, "", "workflows/testdata/<name>.json")
//
// Both write the JSON form the replayer reads. ReplayHistories then replays every
// testdata/*.json and testdata/*/*.json file against the current code.
package replaytest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// Export returns the full history of a workflow run as JSON, in the format of
// `temporal workflow show --output json`. runID may be empty (the latest run). The run
// should be closed: a running workflow's history is cut at the moment of the call.
func Export(ctx context.Context, c client.Client, workflowID, runID string) ([]byte, error) {
	hist := &historypb.History{}
	iter := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		event, err := iter.Next()
		if err != nil {
			return nil, fmt.Errorf("replaytest: read history of %s: %w", workflowID, err)
		}
		hist.Events = append(hist.Events, event)
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		return nil, fmt.Errorf("replaytest: encode history of %s: %w", workflowID, err)
	}
	return data, nil
}

// WriteFile writes the history of a workflow run (see Export) to path.
func WriteFile(ctx context.Context, c client.Client, workflowID, runID, path string) error {
	data, err := Export(ctx, c, workflowID, runID)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("replaytest: write history of %s: %w", workflowID, err)
	}
	return nil
}

// ReplayHistories replays every dir/*.json and dir/*/*.json history against workflowFns
// (registered under their function names), each in its own subtest named by its path under
// dir. It skips the test when dir holds no history.
func ReplayHistories(t *testing.T, dir string, workflowFns ...any) {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.json", filepath.Join("*", "*.json")} {
		found, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			t.Fatalf("replaytest: list %s: %v", dir, err)
		}
		files = append(files, found...)
	}
	if len(files) == 0 {
		t.Skipf("no recorded histories in %s", dir)
	}
	for _, file := range files {
		name, err := filepath.Rel(dir, file)
		if err != nil {
			name = filepath.Base(file)
		}
		t.Run(name, func(t *testing.T) {
			replayer := worker.NewWorkflowReplayer()
			for _, fn := range workflowFns {
				replayer.RegisterWorkflow(fn)
			}
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, file); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}
