package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileMaxBytes caps the content of one write_file call.
const WriteFileMaxBytes = 8 << 20

func writeFileTool() Tool {
	return Tool{
		Name: "write_file",
		Description: "Write a text file under the working directory, replacing it if it exists and " +
			"creating missing parent directories. At most 8 MiB per call.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the working directory."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`),
		// A read-only (or unknown) sandbox forbids writes unless someone approves, and nobody can.
		NeedsApproval: func(env Env, _ Call) bool { return !WritesAllowed(env.SandboxMode) },
		Handler:       writeFile,
	}
}

type writeFileArgs struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

func writeFile(ctx context.Context, env Env, call Call) (Result, error) {
	var args writeFileArgs
	if err := decodeInput(call, &args); err != nil {
		return Result{}, err
	}
	switch {
	case args.Path == "":
		return Result{}, errors.New("invalid arguments: write_file: path is required")
	case args.Content == nil:
		return Result{}, errors.New("invalid arguments: write_file: content is required")
	case len(*args.Content) > WriteFileMaxBytes:
		return Result{}, fmt.Errorf("write_file %q: content is %d bytes, more than the limit of %d bytes per call",
			args.Path, len(*args.Content), WriteFileMaxBytes)
	}
	w, rel, err := openPath(ctx, "write_file", env, args.Path)
	if err != nil {
		return Result{}, err
	}
	defer w.Close()
	if dir := filepath.Dir(rel); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return Result{}, w.fsErr(args.Path, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, w.pathErr(args.Path, err.Error())
	}
	f, err := w.openRegular(args.Path, rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return Result{}, err
	}
	_, err = f.WriteString(*args.Content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, w.fsErr(args.Path, err)
	}
	return TextResult(fmt.Sprintf("wrote %d bytes to %s", len(*args.Content), args.Path)), nil
}
