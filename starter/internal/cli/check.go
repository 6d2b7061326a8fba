package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/workflows"
)

// startCheck names the pre-start check a run failed (startCheckError).
type startCheck int

const (
	// checkScript: a root session routed to the scripted model names no script.
	checkScript startCheck = iota + 1
	// checkRequest: the workflow's own start checks (workflows.CheckInput) refuse the input.
	checkRequest
	// checkCwd: the run's working directory is not a directory.
	checkCwd
	// checkEncode: the input does not encode.
	checkEncode
	// checkSize: the encoded input is over workflows.MaxStartInputBytes.
	checkSize
)

// startCheckError is the pre-start check a run failed, for `starter run` and `starter batch`
// to word with the flag or the field that carries the bad value.
type startCheckError struct {
	check startCheck
	err   error  // checkRequest, checkEncode: the error
	cwd   string // checkCwd: the directory
	size  int    // checkSize: the encoded size
}

func (e *startCheckError) Error() string {
	switch e.check {
	case checkScript:
		return fmt.Sprintf("model-provider %s needs a script as its model", model.ProviderScripted)
	case checkCwd:
		return fmt.Sprintf("cwd %s is not a directory", e.cwd)
	case checkSize:
		return fmt.Sprintf("the request is %d bytes encoded, over %d bytes", e.size, workflows.MaxStartInputBytes)
	}
	return e.err.Error()
}

func (e *startCheckError) Unwrap() error { return e.err }

// checkStart makes the checks every run the starter starts passes first, `starter run` and
// each task of `starter batch` alike, so that a rejection starts nothing (no failed run is
// left behind): a root session routed to the scripted model names its script; the
// workflow's own start checks (workflows.CheckInput); the run's cwd (its root session's, else
// its parent's when set) is a directory, or, with absentOK, absent from this host (it may
// exist on its worker's); and the input, JSON-encoded, fits in one Temporal payload
// (workflows.MaxStartInputBytes). It returns nil or the first failed check as a
// *startCheckError.
func checkStart(in workflows.StartInput, absentOK bool) error {
	if r := in.Route(); in.Root != nil && r.Provider == model.ProviderScripted && r.Model == "" {
		return &startCheckError{check: checkScript}
	}
	if err := workflows.CheckInput(in); err != nil {
		return &startCheckError{check: checkRequest, err: err}
	}
	if cwd := in.Cwd(); cwd != "" {
		st, err := os.Stat(cwd)
		if err == nil && !st.IsDir() || err != nil && !absentOK {
			return &startCheckError{check: checkCwd, cwd: cwd}
		}
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return &startCheckError{check: checkEncode, err: err}
	}
	if len(raw) > workflows.MaxStartInputBytes {
		return &startCheckError{check: checkSize, size: len(raw)}
	}
	return nil
}

// utf8BOM is the byte order mark some editors write at the start of a UTF-8 file.
var utf8BOM = []byte("\ufeff")

// trimBOM returns the content of a file the starter reads (a --schema file, a tasks file)
// without the UTF-8 byte order mark it may start with: the one BOM rule of the starter.
func trimBOM(data []byte) []byte { return bytes.TrimPrefix(data, utf8BOM) }
