package app

import (
	"fmt"
	"strconv"
	"strings"
)

// StringList is a repeatable string flag of the worker and the starter: each occurrence
// appends one value.
type StringList []string

func (l *StringList) String() string     { return strings.Join(*l, ",") }
func (l *StringList) Set(v string) error { *l = append(*l, v); return nil }

// providerLimits is the repeatable PROVIDER=N flag --model-concurrency and --model-rpm.
type providerLimits map[string]int

func (l providerLimits) String() string { return fmt.Sprint(map[string]int(l)) }

func (l providerLimits) Set(v string) error {
	provider, n, ok := strings.Cut(v, "=")
	limit, err := strconv.Atoi(n)
	if !ok || provider == "" || err != nil || limit < 1 {
		return fmt.Errorf("want PROVIDER=N with N at least 1: %q", v)
	}
	l[provider] = limit
	return nil
}
