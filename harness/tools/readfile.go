package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// ReadFileMaxBytes caps the text read_file returns in one call; the rest is reachable with
// offset and limit.
const ReadFileMaxBytes = 256 << 10

// sniffLen is how much of a file is checked for NUL bytes to tell binary from text.
const sniffLen = 8000

func readFileTool() Tool {
	return Tool{
		Name: "read_file",
		Description: "Read a text file under the working directory. Returns the file's text, from line " +
			"`offset` (1-based, default 1) for at most `limit` lines (default: to the end). Output is " +
			"capped at 256 KiB; a note at the end says where to continue.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the working directory."},
    "offset": {"type": "integer", "minimum": 1, "description": "First line to read, 1-based (default 1)."},
    "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to read (default: all)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
		Handler: readFile,
	}
}

type readFileArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

func readFile(ctx context.Context, env Env, call Call) (Result, error) {
	var args readFileArgs
	if err := decodeInput(call, &args); err != nil {
		return Result{}, err
	}
	switch {
	case args.Path == "":
		return Result{}, errors.New("invalid arguments: read_file: path is required")
	case args.Offset < 0 || args.Limit < 0:
		return Result{}, errors.New("invalid arguments: read_file: offset and limit must be positive")
	}
	if args.Offset == 0 {
		args.Offset = 1
	}
	w, rel, err := openPath(ctx, "read_file", env, args.Path)
	if err != nil {
		return Result{}, err
	}
	defer w.Close()
	f, err := w.openRead(args.Path, rel)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffLen); bytes.IndexByte(head, 0) >= 0 {
		return Result{}, w.pathErr(args.Path, "is a binary file, not text")
	}
	text, err := readLines(ctx, br, args.Offset, args.Limit)
	if err != nil {
		return Result{}, w.fsErr(args.Path, err)
	}
	if text.lines < args.Offset && args.Offset > 1 {
		return Result{}, w.pathErr(args.Path, fmt.Sprintf("offset %d is past the end of the file (%d lines)", args.Offset, text.lines))
	}
	if text.lines == 0 {
		return TextResult("(empty file)"), nil
	}
	return TextResult(text.body), nil
}

type linesRead struct {
	body  string
	lines int // lines of the file seen, including any read past the selection
}

// readLines returns lines [offset, offset+limit) of r (limit 0: to the end), cut at
// ReadFileMaxBytes with a note saying where to continue. Memory stays bounded by the cap even
// for a file that is one huge line; a done ctx stops the read.
func readLines(ctx context.Context, r *bufio.Reader, offset, limit int) (linesRead, error) {
	var b strings.Builder
	var out linesRead
	line, atLineStart := 0, true
	for {
		if err := ctx.Err(); err != nil {
			return linesRead{}, err
		}
		chunk, err := r.ReadSlice('\n')
		if len(chunk) > 0 {
			if atLineStart {
				line++
				out.lines = line
				if limit > 0 && line >= offset+limit {
					break
				}
			}
			if line >= offset {
				if room := ReadFileMaxBytes - b.Len(); len(chunk) > room {
					if atLineStart && b.Len() > 0 {
						fmt.Fprintf(&b, "\n[truncated: output is capped at %d bytes; continue with offset=%d]", ReadFileMaxBytes, line)
					} else {
						for room > 0 && !utf8.RuneStart(chunk[room]) {
							room--
						}
						b.Write(chunk[:room])
						fmt.Fprintf(&b, "\n[truncated: output is capped at %d bytes; line %d was cut short, continue with offset=%d]", ReadFileMaxBytes, line, line+1)
					}
					break
				}
				b.Write(chunk)
			}
			atLineStart = chunk[len(chunk)-1] == '\n'
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return linesRead{}, err
		}
	}
	out.body = b.String()
	return out, nil
}
