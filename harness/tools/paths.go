package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// workspace is one file tool call's view of Env.Cwd. Paths are checked by resolve, which gives
// the model a clear reason for every rejection; the I/O then goes through an os.Root, so a
// symlink swapped in between the check and the use still cannot lead outside the cwd.
type workspace struct {
	tool string
	cwd  string // Env.Cwd, cleaned
	real string // cwd with every symlink resolved
	root *os.Root
}

func openWorkspace(tool string, env Env) (*workspace, error) {
	if !filepath.IsAbs(env.Cwd) {
		return nil, fmt.Errorf("%s: working directory %q is not an absolute path", tool, env.Cwd)
	}
	cwd := filepath.Clean(env.Cwd)
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return nil, fmt.Errorf("%s: working directory %q: %w", tool, cwd, unwrapPathError(err))
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("%s: working directory %q: %w", tool, cwd, unwrapPathError(err))
	}
	return &workspace{tool: tool, cwd: cwd, real: real, root: root}, nil
}

func (w *workspace) Close() error { return w.root.Close() }

// resolve checks the model-supplied path p ("" means the cwd) and returns it relative to the
// real cwd, free of symlinks in every component that exists, for use with w.root. Absolute
// paths, `..` escapes and symlinks leading outside the cwd are rejected. Symlinks are resolved
// on the longest existing prefix, so a file not yet created under a symlinked directory that
// points outside is caught too.
func (w *workspace) resolve(p string) (string, error) {
	if filepath.IsAbs(p) {
		return "", w.pathErr(p, "absolute paths are not allowed; use a path relative to the working directory")
	}
	joined := filepath.Join(w.cwd, p)
	if rel, _ := filepath.Rel(w.cwd, joined); escapes(rel) {
		return "", w.pathErr(p, "path escapes the working directory")
	}
	prefix := joined
	for {
		if _, err := os.Lstat(prefix); err == nil || prefix == w.cwd {
			break
		}
		prefix = filepath.Dir(prefix)
	}
	realPrefix, err := filepath.EvalSymlinks(prefix)
	if err != nil {
		return "", w.pathErr(p, fmt.Sprintf("cannot resolve symlinks: %v", unwrapPathError(err)))
	}
	rest, _ := filepath.Rel(prefix, joined)
	real := filepath.Join(realPrefix, rest)
	rel, err := filepath.Rel(w.real, real)
	if err != nil || escapes(rel) {
		return "", w.pathErr(p, fmt.Sprintf("path resolves outside the working directory (to %s) through a symlink", real))
	}
	return rel, nil
}

func escapes(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel)
}

// pathErr names the tool and the path as the model gave it.
func (w *workspace) pathErr(p, reason string) error {
	return fmt.Errorf("%s %q: %s", w.tool, p, reason)
}

// fsErr reports a file system failure on the model's path p without the resolved path the
// *fs.PathError would repeat.
func (w *workspace) fsErr(p string, err error) error {
	return w.pathErr(p, unwrapPathError(err).Error())
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
