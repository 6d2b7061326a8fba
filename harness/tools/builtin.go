package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DefaultToolNames are the built-in tools of the default preset, sorted.
var DefaultToolNames = []string{"grep", "list_dir", "read_file", "write_file"}

// Builtins returns the built-in file tools: read_file, list_dir, grep and write_file. All of
// them are confined to Env.Cwd.
func Builtins() []Tool {
	return []Tool{grepTool(), listDirTool(), readFileTool(), writeFileTool()}
}

// RegisterBuiltins registers every tool of Builtins in r.
func RegisterBuiltins(r *Registry) error {
	for _, t := range Builtins() {
		if err := r.Register(t); err != nil {
			return err
		}
	}
	return nil
}

// decodeInput unmarshals a call's input into v, rejecting unknown fields so that a misspelt
// argument is reported rather than silently ignored.
func decodeInput(call Call, v any) error {
	dec := json.NewDecoder(bytes.NewReader(call.Input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %s: %v", call.Name, err)
	}
	return nil
}
