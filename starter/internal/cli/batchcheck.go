package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// maxReported bounds the bad lines one batch check reports.
const maxReported = 20

// readTasks reads and checks every task of the file at path and returns them with the
// line number of each. Every bad line is reported, each with the file and its line number,
// in one usageError: lines that do not parse, tasks a run would refuse before publication,
// task ids used twice, cwds that are not directories, and tasks over one payload
// (checkStart). A UTF-8 byte order mark at the start of the file is ignored (trimBOM).
func readTasks(path, batchID string, d workflows.TaskDefaults) ([]workflows.Task, []int, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, nil, usagef("starter batch: %v", err)
	}
	defer file.Close()
	var (
		tasks  []workflows.Task
		lines  []int
		bad    = badLines{source: path}
		idLine = map[string]int{}
	)
	r := bufio.NewReader(file)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, nil, usagef("starter batch: read %s: %v", path, err)
		}
		if len(line) == 0 && err == io.EOF {
			break
		}
		if n == 1 {
			line = trimBOM(line)
		}
		if !utf8.Valid(line) {
			// Decoding would replace the bad bytes with U+FFFD and run another task.
			bad.add(fmt.Sprintf("%s:%d", path, n), errors.New("the line is not valid UTF-8"))
			continue
		}
		t, blank, perr := workflows.ParseTaskLine(line)
		if blank {
			continue
		}
		if perr == nil {
			perr = checkTask(t, batchID, d)
		}
		if perr == nil && t.ID != "" {
			if first, dup := idLine[t.ID]; dup {
				perr = fmt.Errorf("task id %q is also the id of line %d", t.ID, first)
			} else {
				idLine[t.ID] = n
			}
		}
		if perr != nil {
			bad.add(fmt.Sprintf("%s:%d", path, n), perr)
			continue
		}
		tasks = append(tasks, t)
		lines = append(lines, n)
	}
	if err := bad.err(); err != nil {
		return nil, nil, err
	}
	if len(tasks) == 0 {
		return nil, nil, usagef("starter batch: %s: no tasks", path)
	}
	return tasks, lines, nil
}

// badLines collects the bad tasks of a batch, each named by where it comes from, and
// reports the first maxReported of them in one usageError.
type badLines struct {
	source string // the tasks file, or the batch a retry reads
	msgs   []string
	n      int
}

func (b *badLines) add(where string, err error) {
	b.n++
	if len(b.msgs) < maxReported {
		b.msgs = append(b.msgs, fmt.Sprintf("starter batch: %s: %v", where, err))
	}
}

// err is the usageError of the bad tasks, nil when there is none.
func (b *badLines) err() error {
	if b.n == 0 {
		return nil
	}
	msgs := b.msgs
	if b.n > len(msgs) {
		msgs = append(msgs, fmt.Sprintf("starter batch: %s: %d more bad lines", b.source, b.n-len(msgs)))
	}
	return usagef("%s", strings.Join(msgs, "\n"))
}

// routeTasks routes every task of p to the task queue of the workspace root that holds its
// cwd (subflow.Workspaces.RouteTask), reading the roots the workers of p.in.TaskQueue serve
// once for the whole batch. Tasks whose cwd no worker serves are a usageError naming each
// (p.where) and its cwd, like the other bad lines: nothing starts.
func routeTasks(ctx context.Context, c client.Client, p *batchPlan) error {
	w, err := subflow.ReadWorkspaces(ctx, c, p.in.TaskQueue)
	if err != nil {
		return fmt.Errorf("starter batch: %w", err)
	}
	bad := badLines{source: p.source}
	i := 0
	for _, tasks := range [][]workflows.Task{p.in.Tasks, p.paged} {
		for j := range tasks {
			if err := w.RouteTask(&tasks[j], p.in.Defaults); err != nil {
				bad.add(p.where(i), err)
			}
			i++
		}
	}
	return bad.err()
}

// checkTask makes the checks of `starter run` before publication (checkStart), so a bad
// line stops the batch before anything runs; a task's cwd must exist on this host.
func checkTask(t workflows.Task, batchID string, d workflows.TaskDefaults) error {
	if err := workflows.CheckUserWorkflowID(t.ID); err != nil {
		return fmt.Errorf("task id: %w", err)
	}
	in, err := t.StartInput(batchID, d)
	if err != nil {
		return err
	}
	err = checkStart(in, false)
	var ce *startCheckError
	if !errors.As(err, &ce) {
		return err
	}
	var ve *subagent.ValidationError
	switch {
	case ce.check == checkScript:
		return fmt.Errorf("task: model-provider %s needs model SCRIPT.json", model.ProviderScripted)
	case ce.check == checkCwd:
		return fmt.Errorf("task: cwd %s is not a directory", ce.cwd)
	case ce.check == checkEncode:
		return fmt.Errorf("task: encode: %w", ce.err)
	case ce.check == checkSize:
		return fmt.Errorf("task: %d bytes, over the limit of %d bytes per task", ce.size, workflows.MaxStartInputBytes)
	case errors.As(ce.err, &ve):
		return errors.New(ve.Message)
	}
	return ce.err
}
