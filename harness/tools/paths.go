package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Limits of a model-supplied path, checked before the path touches the file system: resolving
// costs a system call per component, so an unbounded path could occupy a tool call for
// seconds.
const (
	MaxPathBytes = 4096 // Linux's PATH_MAX
	MaxPathParts = 256  // components of the path as given
)

// workspace is one file tool call's view of Env.Cwd. Paths are checked by resolve, which gives
// the model a clear reason for every rejection; the I/O then goes through an os.Root, so a
// symlink swapped in between the check and the use still cannot lead outside the cwd.
type workspace struct {
	ctx       context.Context
	tool      string
	cwd       string   // Env.Cwd, cleaned
	real      string   // cwd with every symlink resolved
	protected []string // Env.Protected, symlinks resolved where they exist
	root      *os.Root
	// links is set when the cwd lies under one of Env.HardLinkRoots: files with several
	// hard links may be read.
	links bool
}

func openWorkspace(ctx context.Context, tool string, env Env) (*workspace, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
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
	if len(env.Roots) > 0 && !underAny(real, env.Roots) {
		root.Close()
		return nil, fmt.Errorf("%s: working directory %q resolves to %s, which lies outside the workspace roots this worker serves (%s)",
			tool, cwd, real, strings.Join(env.Roots, ", "))
	}
	w := &workspace{ctx: ctx, tool: tool, cwd: cwd, real: real, root: root, links: underAny(real, env.HardLinkRoots)}
	for _, p := range env.Protected {
		if rp, err := filepath.EvalSymlinks(p); err == nil {
			w.protected = append(w.protected, rp)
		}
		w.protected = append(w.protected, filepath.Clean(p))
	}
	return w, nil
}

func (w *workspace) Close() error { return w.root.Close() }

// openPath opens the workspace of tool in env and resolves p in it (see resolve). On success
// the caller closes w; on an error nothing is left open.
func openPath(ctx context.Context, tool string, env Env, p string) (w *workspace, rel string, err error) {
	w, err = openWorkspace(ctx, tool, env)
	if err != nil {
		return nil, "", err
	}
	if rel, err = w.resolve(p); err != nil {
		w.Close()
		return nil, "", err
	}
	return w, rel, nil
}

// resolve checks the model-supplied path p ("" means the cwd) and returns it relative to the
// real cwd, free of symlinks in every component that exists, for use with w.root. Absolute
// paths, `..` escapes and symlinks leading outside the cwd are rejected. Symlinks are resolved
// on the longest existing prefix, so a file not yet created under a symlinked directory that
// points outside is caught too.
func (w *workspace) resolve(p string) (string, error) {
	if len(p) > MaxPathBytes {
		return "", w.pathErr(clipPath(p), fmt.Sprintf("path is longer than %d bytes", MaxPathBytes))
	}
	if n := strings.Count(p, "/") + 1; n > MaxPathParts {
		return "", w.pathErr(clipPath(p), fmt.Sprintf("path has %d components, more than %d", n, MaxPathParts))
	}
	if err := w.ctx.Err(); err != nil {
		return "", w.pathErr(p, err.Error())
	}
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
	if w.isProtected(real) {
		return "", w.pathErr(p, "is inside a session store, which the file tools cannot access")
	}
	return rel, nil
}

// underAny reports whether the absolute path p is one of dirs or lies under one.
func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if rel, err := filepath.Rel(d, p); err == nil && !escapes(rel) {
			return true
		}
	}
	return false
}

// isProtected reports whether the absolute, symlink-free path real is one of Env.Protected or
// lies under one.
func (w *workspace) isProtected(real string) bool {
	for _, p := range w.protected {
		if rel, err := filepath.Rel(p, real); err == nil && !escapes(rel) {
			return true
		}
	}
	return false
}

// openRegular opens rel (from resolve) for flag, refusing anything but a regular file — a
// FIFO or device could block the call past its cancel, or never end. The type is checked
// before the open and again on the opened file, which is opened non-blocking so that a FIFO
// swapped in between cannot block the open either.
func (w *workspace) openRegular(p, rel string, flag int) (*os.File, error) {
	if info, err := w.root.Lstat(rel); err == nil {
		if err := w.checkRegular(p, info); err != nil {
			return nil, err
		}
	} else if flag&os.O_CREATE == 0 || !errors.Is(err, fs.ErrNotExist) {
		return nil, w.fsErr(p, err)
	}
	f, err := w.root.OpenFile(rel, flag|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, w.fsErr(p, err)
	}
	info, err := f.Stat()
	if err == nil {
		err = w.checkRegular(p, info)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// HardLinkError is the refusal of a regular file with more than one hard link, under a cwd
// whose root's hard links the operator did not declare trusted (Env.HardLinkRoots): another
// link to the same inode may lie outside the working directory — `ln outside/secret ws/x`
// needs no access to the workspace's tools — so reading it could disclose a file the cwd
// does not hold.
type HardLinkError struct {
	Tool  string
	Path  string // as the model gave it
	Links uint64
}

func (e *HardLinkError) Error() string {
	return fmt.Sprintf("%s %q: has %d hard links, so it may be a file outside the working directory; the file tools do not read it "+
		"(an operator may declare a workspace root's hard links trusted: worker --workspace-root trust-hardlinks:DIR)",
		e.Tool, e.Path, e.Links)
}

// linkCount returns the number of hard links of the file info describes, when the
// platform's stat tells it (Linux and macOS do).
func linkCount(info fs.FileInfo) (uint64, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

// checkLinks refuses a regular file with more than one hard link unless the workspace's
// hard links are trusted (see HardLinkError).
func (w *workspace) checkLinks(p string, info fs.FileInfo) error {
	if w.links || !info.Mode().IsRegular() {
		return nil
	}
	if n, ok := linkCount(info); ok && n > 1 {
		return &HardLinkError{Tool: w.tool, Path: p, Links: n}
	}
	return nil
}

// openRead opens rel (from resolve) for reading: a regular file (openRegular) with a single
// hard link, or any number under a trusted root. The links are counted on the opened file,
// so a link made between a check and the open is caught.
func (w *workspace) openRead(p, rel string) (*os.File, error) {
	f, err := w.openRegular(p, rel, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil {
		err = w.checkLinks(p, info)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkRegular names what a non-regular file is.
func (w *workspace) checkRegular(p string, info fs.FileInfo) error {
	switch m := info.Mode(); {
	case m.IsRegular():
		return nil
	case m.IsDir() && w.tool == "read_file":
		return w.pathErr(p, "is a directory; use list_dir")
	case m.IsDir():
		return w.pathErr(p, "is a directory")
	case m&fs.ModeNamedPipe != 0:
		return w.pathErr(p, "is a named pipe (FIFO), not a regular file")
	case m&fs.ModeDevice != 0:
		return w.pathErr(p, "is a device, not a regular file")
	case m&fs.ModeSocket != 0:
		return w.pathErr(p, "is a socket, not a regular file")
	default:
		return w.pathErr(p, "is not a regular file")
	}
}

// clipPath shortens an over-long path for a message.
func clipPath(p string) string {
	const max = 80
	if len(p) <= max {
		return p
	}
	return p[:max] + "…"
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
