package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// ListDirMaxEntries caps the entries list_dir returns.
const ListDirMaxEntries = 1000

func listDirTool() Tool {
	return Tool{
		Name: "list_dir",
		Description: "List a directory under the working directory: one name per line, sorted, " +
			"directories marked with a trailing '/'.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory path relative to the working directory (default: the working directory)."}
  },
  "additionalProperties": false
}`),
		Handler: listDir,
	}
}

type listDirArgs struct {
	Path string `json:"path"`
}

func listDir(_ context.Context, env Env, call Call) (Result, error) {
	var args listDirArgs
	if err := decodeInput(call, &args); err != nil {
		return Result{}, err
	}
	if args.Path == "" {
		args.Path = "."
	}
	w, err := openWorkspace("list_dir", env)
	if err != nil {
		return Result{}, err
	}
	defer w.Close()
	rel, err := w.resolve(args.Path)
	if err != nil {
		return Result{}, err
	}
	f, err := w.root.Open(rel)
	if err != nil {
		return Result{}, w.fsErr(args.Path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Result{}, w.fsErr(args.Path, err)
	}
	if !info.IsDir() {
		return Result{}, w.pathErr(args.Path, "is not a directory; use read_file")
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return Result{}, w.fsErr(args.Path, err)
	}
	if len(entries) == 0 {
		return TextResult("(empty directory)"), nil
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
		if e.IsDir() {
			names[i] += "/"
		}
	}
	sort.Strings(names)
	var note string
	if len(names) > ListDirMaxEntries {
		note = fmt.Sprintf("\n[truncated: showing %d of %d entries]", ListDirMaxEntries, len(names))
		names = names[:ListDirMaxEntries]
	}
	return TextResult(strings.Join(names, "\n") + note), nil
}
