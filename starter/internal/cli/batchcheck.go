package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// maxReported bounds the bad lines one batch check reports.
const maxReported = 20

// maxLineBytes bounds a line of a tasks file, the one thing of the file the starter holds
// whole: a longer line cannot hold a task under workflows.MaxStartInputBytes, whatever its
// escapes (a JSON escape takes at most 6 bytes for one), so it is reported unread.
const maxLineBytes = 6*workflows.MaxStartInputBytes + 64<<10

// taskFile is a tasks file (JSONL, one task object a line; see workflows.ParseTaskLine),
// read as a stream: check reads it once and reports every bad line, tasks reads it again
// and yields its tasks one by one, so that neither holds more than a line and the ids seen.
type taskFile struct {
	path     string
	open     func() (io.ReadCloser, error) // the file; tests wrap it
	batchID  string
	defaults workflows.TaskDefaults
}

// newTaskFile returns the tasks file at path, for batch batchID.
func newTaskFile(path, batchID string, d workflows.TaskDefaults) *taskFile {
	return &taskFile{path: path, batchID: batchID, defaults: d,
		open: func() (io.ReadCloser, error) { return os.Open(path) }}
}

// check reads and checks every task of the file and returns their count. Every bad line is
// reported, each with the file and its line number, in one usageError: lines that do not
// parse or are over maxLineBytes, tasks a run would refuse before publication, task ids used
// twice, cwds that are not directories, tasks over one payload (checkStart), and, when route
// is not nil, tasks whose cwd no worker serves (route's error). A UTF-8 byte order mark at
// the start of the file is ignored (trimBOM).
func (f *taskFile) check(route func(*workflows.Task) error) (int, error) {
	n := 0
	bad := badLines{source: f.path}
	err := f.scan(route, &bad, func(workflows.Task) error { n++; return nil })
	if err == nil {
		err = bad.err()
	}
	if err == nil && n == 0 {
		err = usagef("starter batch: %s: no tasks", f.path)
	}
	return n, err
}

// tasks yields the tasks of the file in order, routed by route when not nil, reading it
// again: a line that is now bad (the file changed since check) ends the stream with its
// error.
func (f *taskFile) tasks(route func(*workflows.Task) error) iter.Seq2[workflows.Task, error] {
	return func(yield func(workflows.Task, error) bool) {
		err := f.scan(route, nil, func(t workflows.Task) error {
			if !yield(t, nil) {
				return errStopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopped) {
			yield(workflows.Task{}, err)
		}
	}
}

// errStopped ends a scan whose reader wants no more tasks.
var errStopped = errors.New("stopped")

// scan reads the file line by line and passes each good task to each. A bad line goes to
// bad and the scan goes on; with bad nil, the first bad line ends the scan with its error.
// An error from each ends the scan too.
func (f *taskFile) scan(route func(*workflows.Task) error, bad *badLines, each func(workflows.Task) error) error {
	file, err := f.open()
	if err != nil {
		return usagef("starter batch: %v", err)
	}
	defer file.Close()
	idLine := map[string]int{}
	r := bufio.NewReader(file)
	for n := 1; ; n++ {
		line, long, err := readLine(r, maxLineBytes)
		if err != nil && err != io.EOF {
			return usagef("starter batch: read %s: %v", f.path, err)
		}
		if len(line) == 0 && !long && err == io.EOF {
			return nil
		}
		if n == 1 {
			line = trimBOM(line)
		}
		perr := checkLine(line, long)
		var t workflows.Task
		if perr == nil {
			var blank bool
			if t, blank, perr = workflows.ParseTaskLine(line); blank {
				continue
			}
		}
		if perr == nil {
			perr = checkTask(t, f.batchID, f.defaults)
		}
		if perr == nil && t.ID != "" {
			if first, dup := idLine[t.ID]; dup {
				perr = fmt.Errorf("task id %q is also the id of line %d", t.ID, first)
			} else {
				idLine[t.ID] = n
			}
		}
		if perr == nil && route != nil {
			perr = route(&t)
		}
		switch {
		case perr != nil && bad == nil:
			return usagef("starter batch: %s:%d: %v (the file changed while the batch started)", f.path, n, perr)
		case perr != nil:
			bad.add(fmt.Sprintf("%s:%d", f.path, n), perr)
		default:
			if err := each(t); err != nil {
				return err
			}
		}
	}
}

// checkLine makes the checks of a line before it is parsed; long says it was over
// maxLineBytes.
func checkLine(line []byte, long bool) error {
	switch {
	case long:
		return fmt.Errorf("the line is over %d bytes: no task that long fits the limit of %d bytes per task", maxLineBytes, workflows.MaxStartInputBytes)
	case !utf8.Valid(line):
		// Decoding would replace the bad bytes with U+FFFD and run another task.
		return errors.New("the line is not valid UTF-8")
	}
	return nil
}

// readLine reads the next line of r, up to max bytes; a longer line is read to its end but
// not kept (long is true). err is io.EOF at the end of r.
func readLine(r *bufio.Reader, max int) (line []byte, long bool, err error) {
	for {
		part, err := r.ReadSlice('\n')
		if !long && len(line)+len(part) <= max {
			line = append(line, part...)
		} else {
			long, line = true, nil
		}
		if err != bufio.ErrBufferFull {
			return line, long, err
		}
	}
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
