package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"syscall"
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

func listDir(ctx context.Context, env Env, call Call) (Result, error) {
	var args listDirArgs
	if err := decodeInput(call, &args); err != nil {
		return Result{}, err
	}
	if args.Path == "" {
		args.Path = "."
	}
	w, rel, err := openPath(ctx, "list_dir", env, args.Path)
	if err != nil {
		return Result{}, err
	}
	defer w.Close()
	// Checked before the open: opening a FIFO blocks until a writer comes.
	info, err := w.root.Lstat(rel)
	if err != nil {
		return Result{}, w.fsErr(args.Path, err)
	}
	if !info.IsDir() {
		return Result{}, w.pathErr(args.Path, "is not a directory; use read_file")
	}
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Result{}, w.fsErr(args.Path, err)
	}
	defer f.Close()
	var entries []fs.DirEntry
	for {
		if err := ctx.Err(); err != nil {
			return Result{}, w.pathErr(args.Path, err.Error())
		}
		batch, err := f.ReadDir(1024)
		entries = append(entries, batch...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Result{}, w.fsErr(args.Path, err)
		}
	}
	if len(entries) == 0 {
		return TextResult("(empty directory)"), nil
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
		if e.IsDir() {
			names[i] += "/"
		} else if info, err := e.Info(); err == nil && w.checkLinks(e.Name(), info) != nil {
			// Named so the model does not spend a call on it; nothing of the file is shown.
			names[i] += " [more than one hard link: not readable]"
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
