package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration in a workflow's JSON input (docs/json.md). It decodes from a
// string a person writes, as time.ParseDuration reads it ("90s", "10m", "1h30m"), or from
// Go's own form, an integer count of nanoseconds, which every input recorded before it
// carries. It encodes as that integer: workers released before Duration decode only the
// integer, and workers start runs too (a batch's children, nested runs), so a string
// written during a rolling upgrade would fail the run on an older worker.
type Duration time.Duration

// UnmarshalJSON decodes a duration string or an integer of nanoseconds.
func (d *Duration) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("a duration must be a string such as \"90s\" or \"10m\", or an integer of nanoseconds: %q", s)
		}
		*d = Duration(v)
		return nil
	}
	var ns int64
	if err := json.Unmarshal(data, &ns); err != nil {
		return fmt.Errorf("a duration must be a string such as \"90s\" or \"10m\", or an integer of nanoseconds: %s", data)
	}
	*d = Duration(ns)
	return nil
}

// String returns the duration as time.Duration writes it ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }
