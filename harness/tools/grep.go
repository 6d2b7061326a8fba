package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Limits of one grep call.
const (
	GrepMaxMatches   = 200
	GrepMaxLineBytes = 500     // longer matching lines are cut short
	GrepMaxFileBytes = 8 << 20 // larger files are skipped
)

func grepTool() Tool {
	return Tool{
		Name: "grep",
		Description: "Search files under the working directory for lines matching a Go regular " +
			"expression (RE2 syntax). Returns `file:line:text` per match, at most 200. Searches `path` " +
			"(a file, or a directory recursively; default the working directory), optionally only " +
			"files whose base name matches `glob` (e.g. `*.go`). Binary files, files over 8 MiB, " +
			".git directories and symlinks are skipped.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Go regular expression (RE2 syntax) to search for."},
    "path": {"type": "string", "description": "File or directory relative to the working directory (default: the working directory)."},
    "glob": {"type": "string", "description": "Only search files whose base name matches this glob, e.g. *.go."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`),
		Handler: grep,
	}
}

type grepArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
	Glob    string `json:"glob"`
}

func grep(ctx context.Context, env Env, call Call) (Result, error) {
	var args grepArgs
	if err := decodeInput(call, &args); err != nil {
		return Result{}, err
	}
	if args.Pattern == "" {
		return Result{}, errors.New("invalid arguments: grep: pattern is required")
	}
	re, err := regexp.Compile(args.Pattern)
	if err != nil {
		return Result{}, fmt.Errorf("invalid arguments: grep: pattern %q: %v", args.Pattern, err)
	}
	if _, err := filepath.Match(args.Glob, ""); err != nil {
		return Result{}, fmt.Errorf("invalid arguments: grep: glob %q: %v", args.Glob, err)
	}
	if args.Path == "" {
		args.Path = "."
	}
	w, rel, err := openPath(ctx, "grep", env, args.Path)
	if err != nil {
		return Result{}, err
	}
	defer w.Close()
	fsys := w.root.FS()
	if _, err := fs.Stat(fsys, rel); err != nil {
		return Result{}, w.fsErr(args.Path, err)
	}
	shown := filepath.Clean(args.Path)
	var matches []string
	truncated := false
	linked := 0 // files skipped for their hard links
	err = fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable entries are skipped, not fatal
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != rel || w.isProtected(filepath.Join(w.real, p)) {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symlinks are not followed: their target may lie outside the cwd
		}
		if p != rel && args.Glob != "" {
			if ok, _ := filepath.Match(args.Glob, d.Name()); !ok {
				return nil
			}
		}
		info, err := d.Info()
		if err != nil || info.Size() > GrepMaxFileBytes {
			return nil
		}
		if err := w.checkLinks(p, info); err != nil {
			if p == rel {
				return err // the file asked for: refused as read_file refuses it
			}
			linked++
			return nil
		}
		data, err := w.readRegular(p)
		var linkErr *HardLinkError
		if errors.As(err, &linkErr) {
			linked++ // linked since the check above
			return nil
		}
		if err != nil || len(data) == 0 || bytes.IndexByte(data[:min(len(data), sniffLen)], 0) >= 0 {
			return nil
		}
		sub, _ := filepath.Rel(rel, p)
		name := filepath.Join(shown, sub)
		data = bytes.TrimSuffix(data, []byte("\n")) // no phantom empty line after the last one
		for i, line := range bytes.Split(data, []byte("\n")) {
			line = bytes.TrimSuffix(line, []byte("\r"))
			if !re.Match(line) {
				continue
			}
			if len(matches) == GrepMaxMatches {
				truncated = true
				return fs.SkipAll
			}
			matches = append(matches, fmt.Sprintf("%s:%d:%s", name, i+1, clip(line)))
		}
		return nil
	})
	var linkErr *HardLinkError
	if errors.As(err, &linkErr) {
		linkErr.Path = args.Path
		return Result{}, linkErr
	}
	if err != nil {
		return Result{}, fmt.Errorf("grep %q: %w", args.Path, err)
	}
	var note string
	if linked > 0 {
		note = fmt.Sprintf("\n[skipped %d files with more than one hard link: they may be files outside the working directory]", linked)
	}
	if len(matches) == 0 {
		return TextResult("no matches" + note), nil
	}
	out := strings.Join(matches, "\n")
	if truncated {
		out += fmt.Sprintf("\n[truncated: showing the first %d matches; narrow the pattern, path or glob]", GrepMaxMatches)
	}
	return TextResult(out + note), nil
}

// readRegular reads the regular file at rel (a path of the walk), at most GrepMaxFileBytes of
// it; anything else is an error, never a blocking read, and so is a file with several hard
// links under an untrusted root (*HardLinkError).
func (w *workspace) readRegular(rel string) ([]byte, error) {
	f, err := w.openRead(rel, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, GrepMaxFileBytes))
}

// clip cuts line to GrepMaxLineBytes on a UTF-8 boundary.
func clip(line []byte) string {
	if len(line) <= GrepMaxLineBytes {
		return string(line)
	}
	n := GrepMaxLineBytes
	for n > 0 && !utf8.RuneStart(line[n]) {
		n--
	}
	return string(line[:n]) + "…"
}
