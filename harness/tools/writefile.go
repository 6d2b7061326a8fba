package tools

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
	if err := w.replace(args.Path, rel, *args.Content); err != nil {
		return Result{}, err
	}
	return TextResult(fmt.Sprintf("wrote %d bytes to %s", len(*args.Content), args.Path)), nil
}

// replace makes rel (from resolve) name a new regular file holding content: written to a
// temporary file in the same directory, synced, then renamed over rel. The name is
// replaced, never the inode behind it, so a hard link to a file outside the cwd (`ln
// outside/secret ws/x`) is unlinked from the workspace rather than written through, and a
// reader or a crash sees the old content or the new, never a mix. An existing file keeps
// its permission bits; anything at rel but a regular file (a directory, a FIFO) is refused
// as openRegular refuses it.
func (w *workspace) replace(p, rel, content string) error {
	perm := fs.FileMode(0o644)
	if info, err := w.root.Lstat(rel); err == nil {
		if err := w.checkRegular(p, info); err != nil {
			return err
		}
		perm = info.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return w.fsErr(p, err)
	}
	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".subflow-"+rand.Text()[:12])
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return w.fsErr(p, err)
	}
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Chmod(perm) // the umask may have narrowed it
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.root.Rename(tmp, rel)
	}
	if err != nil {
		_ = w.root.Remove(tmp)
		return w.fsErr(p, err)
	}
	return nil
}
