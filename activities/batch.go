package activities

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/workflows"
)

// Types of the non-retryable ApplicationErrors of the batch activities.
const (
	// TypeBatchFile: a batch's tasks file or results file cannot be opened (missing,
	// not permitted).
	TypeBatchFile = "batch-file"
	// TypeInvalidBatchTask: a line of a tasks file is not a task.
	TypeInvalidBatchTask = "invalid-batch-task"
)

// registerBatch registers the activities of the Batch workflow.
func registerBatch(r worker.ActivityRegistry, a *Activities) {
	r.RegisterActivityWithOptions(a.ReadBatchTasks, activity.RegisterOptions{Name: workflows.ActivityReadBatchTasks})
	r.RegisterActivityWithOptions(a.AppendBatchResults, activity.RegisterOptions{Name: workflows.ActivityAppendBatchResults})
}

// ReadBatchTasks reads a page of at most in.Limit tasks of a JSONL tasks file from byte
// in.Offset, skipping blank lines. A read from offset 0 also counts the file's tasks. A
// missing or unreadable file and a line that is no task are non-retryable errors; the
// latter names the file and the line.
func (a *Activities) ReadBatchTasks(_ context.Context, in workflows.ReadBatchTasksInput) (workflows.ReadBatchTasksOutput, error) {
	f, err := openBatchFile(in.Path, os.O_RDONLY)
	if err != nil {
		return workflows.ReadBatchTasksOutput{}, err
	}
	defer f.Close()
	out := workflows.ReadBatchTasksOutput{Tasks: []workflows.Task{}, Offset: in.Offset, Line: in.Line}
	if in.Offset == 0 {
		if out.Total, err = countLines(f); err != nil {
			return out, fmt.Errorf("activities: count tasks of %s: %w", in.Path, err)
		}
	}
	if _, err := f.Seek(in.Offset, io.SeekStart); err != nil {
		return out, fmt.Errorf("activities: read tasks of %s: %w", in.Path, err)
	}
	r := bufio.NewReader(f)
	for len(out.Tasks) < in.Limit {
		line, err := r.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			out.Done = true
			break
		}
		if err != nil && err != io.EOF {
			return out, fmt.Errorf("activities: read tasks of %s: %w", in.Path, err)
		}
		out.Offset += int64(len(line))
		out.Line++
		t, blank, perr := workflows.ParseTaskLine(line)
		if perr != nil {
			return out, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("%s:%d: %v", in.Path, out.Line, perr), TypeInvalidBatchTask, nil)
		}
		if !blank {
			out.Tasks = append(out.Tasks, t)
		}
	}
	if !out.Done {
		// Say "done" now rather than after one more empty read.
		if _, err := r.Peek(1); err == io.EOF {
			out.Done = true
		}
	}
	return out, nil
}

// countLines counts the lines of f that are not blank.
func countLines(f *os.File) (int, error) {
	s := bufio.NewScanner(f)
	s.Buffer(nil, 64<<20)
	n := 0
	for s.Scan() {
		if len(bytes.TrimSpace(s.Bytes())) > 0 {
			n++
		}
	}
	return n, s.Err()
}

// AppendBatchResults makes the results file in.Offset bytes long — creating it when absent
// — and appends in.Results as JSON lines, synced to disk; it returns the new size. Cutting
// the file back first makes a retried call write each result once.
func (a *Activities) AppendBatchResults(ctx context.Context, in workflows.AppendBatchResultsInput) (int64, error) {
	for i := range in.Results {
		if err := a.resolveBatchResult(ctx, &in.Results[i]); err != nil {
			return 0, err
		}
	}
	f, err := openBatchFile(in.Path, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, res := range in.Results {
		if err := enc.Encode(res); err != nil {
			return 0, fmt.Errorf("activities: encode result %d for %s: %w", res.Index, in.Path, err)
		}
	}
	if err := f.Truncate(in.Offset); err != nil {
		return 0, fmt.Errorf("activities: write results to %s: %w", in.Path, err)
	}
	if _, err := f.WriteAt(buf.Bytes(), in.Offset); err != nil {
		return 0, fmt.Errorf("activities: write results to %s: %w", in.Path, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("activities: sync results of %s: %w", in.Path, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("activities: close results of %s: %w", in.Path, err)
	}
	return in.Offset + int64(buf.Len()), nil
}

// openBatchFile opens path, a missing or forbidden file being a non-retryable error.
func openBatchFile(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag, 0o644)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("activities: open batch file: %v", err), TypeBatchFile, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("activities: open batch file: %w", err)
	}
	return f, nil
}
