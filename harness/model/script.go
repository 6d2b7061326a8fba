package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// script is a parsed, validated scripted-model file (contract R-90).
type script struct {
	responses []scriptResponse
}

// scriptResponse is one entry of "responses". Pointers tell "absent" from "empty".
type scriptResponse struct {
	Text      *string          `json:"text"`
	Chunks    int              `json:"chunks"`
	DelayMs   int64            `json:"delayMs"`
	ToolCalls []scriptToolCall `json:"toolCalls"`
	Finish    string           `json:"finish"`
	Error     *string          `json:"error"`
}

type scriptToolCall struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// parseScript decodes and validates a script. Errors name the response index; the caller adds
// the file name.
func parseScript(data []byte) (*script, error) {
	var file struct {
		Responses *[]json.RawMessage `json:"responses"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if file.Responses == nil {
		return nil, errors.New(`no "responses" array`)
	}
	s := &script{responses: make([]scriptResponse, len(*file.Responses))}
	for i, raw := range *file.Responses {
		r, err := parseResponse(raw)
		if err != nil {
			return nil, fmt.Errorf("response %d: %w", i, err)
		}
		s.responses[i] = r
	}
	return s, nil
}

func parseResponse(raw json.RawMessage) (scriptResponse, error) {
	var r scriptResponse
	dec := json.NewDecoder(bytes.NewReader(raw))
	// A misspelt key ("chunk", "tool_calls") would otherwise be silently ignored.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("invalid response: %w", err)
	}
	if r.Text == nil && len(r.ToolCalls) == 0 && r.Error == nil {
		return r, errors.New(`needs "text", "toolCalls" or "error"`)
	}
	if r.Error != nil && *r.Error == "" {
		return r, errors.New(`empty "error"`)
	}
	if r.Error != nil && len(r.ToolCalls) > 0 {
		return r, errors.New(`"error" cannot be combined with "toolCalls"`)
	}
	if r.Finish != "" && r.Finish != FinishStop && r.Finish != FinishLength {
		return r, fmt.Errorf(`bad finish %q (want "stop" or "length")`, r.Finish)
	}
	if r.Chunks < 0 {
		return r, fmt.Errorf("bad chunks %d (want ≥ 1)", r.Chunks)
	}
	if r.DelayMs < 0 {
		return r, fmt.Errorf("bad delayMs %d (want ≥ 0)", r.DelayMs)
	}
	for j := range r.ToolCalls {
		tc := &r.ToolCalls[j]
		if tc.Name == "" {
			return r, fmt.Errorf("tool call %d: no name", j)
		}
		trimmed := bytes.TrimSpace(tc.Input)
		if len(trimmed) == 0 || string(trimmed) == "null" {
			tc.Input = json.RawMessage("{}")
			continue
		}
		if trimmed[0] != '{' {
			return r, fmt.Errorf("tool call %d (%s): input is not a JSON object", j, tc.Name)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, trimmed); err != nil {
			return r, fmt.Errorf("tool call %d (%s): input: %w", j, tc.Name, err)
		}
		tc.Input = json.RawMessage(compact.Bytes())
	}
	return r, nil
}

// scriptCache holds parsed scripts by absolute path. A file whose size or modification time
// changed is parsed again.
type scriptCache struct {
	mu      sync.Mutex
	entries map[string]scriptEntry
}

type scriptEntry struct {
	modTime time.Time
	size    int64
	script  *script
}

func (c *scriptCache) load(path string) (*script, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: script %s: %w", path, err)
	}
	c.mu.Lock()
	e, ok := c.entries[path]
	c.mu.Unlock()
	if ok && e.modTime.Equal(info.ModTime()) && e.size == info.Size() {
		return e.script, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: script %s: %w", path, err)
	}
	s, err := parseScript(data)
	if err != nil {
		return nil, fmt.Errorf("scripted: script %s: %w", path, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[string]scriptEntry)
	}
	c.entries[path] = scriptEntry{modTime: info.ModTime(), size: info.Size(), script: s}
	return s, nil
}
