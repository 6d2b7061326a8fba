package app

import (
	"flag"
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

// YieldFlag is the flag --yield-activities of the worker and `starter dev`: N, or auto
// (YieldAuto), stored in *n (Options.YieldActivities).
func YieldFlag(n *int) flag.Value { return yieldFlag{n} }

type yieldFlag struct{ n *int }

func (f yieldFlag) String() string {
	switch {
	case f.n == nil: // the flag package's zero value, which PrintDefaults compares with
		return "0"
	case *f.n == YieldAuto:
		return "auto"
	}
	return strconv.Itoa(*f.n)
}

func (f yieldFlag) Set(v string) error {
	if v == "auto" {
		*f.n = YieldAuto
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("want a count of 0 or more, or auto: %q", v)
	}
	*f.n = n
	return nil
}
