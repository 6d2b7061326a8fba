package app

import "strings"

// StringList is a repeatable string flag of the worker and the starter: each occurrence
// appends one value.
type StringList []string

func (l *StringList) String() string     { return strings.Join(*l, ",") }
func (l *StringList) Set(v string) error { *l = append(*l, v); return nil }
