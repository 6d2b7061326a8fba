package subagent

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/subflow-dev/subflow/harness/session"
)

// DefaultMaxDepth is the subagent tool's depth cap when none is configured (contract R-9).
const DefaultMaxDepth = 3

// ProviderManaged is the maxDepth setting that sends no cap: the provider's own runtime
// keeps its recursion budget.
const ProviderManaged = "provider-managed"

// MaxDepthSetting is the subagent tool's `maxDepth` option (contract R-9): a numeric cap (0
// forbids delegation) or provider-managed. The zero value is the default cap,
// DefaultMaxDepth, so an absent key in decoded configuration means the default.
//
// It decodes from a JSON number or string and implements flag.Value.
type MaxDepthSetting struct {
	managed  bool
	limit    int64
	explicit bool // limit was configured; otherwise DefaultMaxDepth applies
}

// MaxDepthLimit returns the setting for the numeric cap n, which must be a non-negative safe
// integer.
func MaxDepthLimit(n int64) (MaxDepthSetting, error) {
	if n < 0 || n > session.MaxSafeInteger {
		return MaxDepthSetting{}, badMaxDepthSetting(strconv.FormatInt(n, 10))
	}
	return MaxDepthSetting{limit: n, explicit: true}, nil
}

// ProviderManagedDepth returns the provider-managed setting.
func ProviderManagedDepth() MaxDepthSetting { return MaxDepthSetting{managed: true} }

// ParseMaxDepthSetting parses `provider-managed` or a non-negative decimal safe integer.
// Surrounding spaces are ignored.
func ParseMaxDepthSetting(s string) (MaxDepthSetting, error) {
	t := strings.TrimSpace(s)
	if t == ProviderManaged {
		return ProviderManagedDepth(), nil
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return MaxDepthSetting{}, badMaxDepthSetting(s)
	}
	setting, err := MaxDepthLimit(n)
	if err != nil {
		return MaxDepthSetting{}, badMaxDepthSetting(s)
	}
	return setting, nil
}

func badMaxDepthSetting(input string) error {
	return Rejectf(RuleInvalidMaxDepthConfig,
		"subagent maxDepth must be a non-negative safe integer or %q: %s", ProviderManaged, input)
}

// IsProviderManaged reports whether no cap is sent.
func (s MaxDepthSetting) IsProviderManaged() bool { return s.managed }

// Limit returns the numeric cap, and false when the setting is provider-managed.
func (s MaxDepthSetting) Limit() (int64, bool) {
	switch {
	case s.managed:
		return 0, false
	case s.explicit:
		return s.limit, true
	}
	return DefaultMaxDepth, true
}

// MaxDepth returns the value for Request.MaxDepth: the cap, or nil when provider-managed.
func (s MaxDepthSetting) MaxDepth() *int64 {
	n, ok := s.Limit()
	if !ok {
		return nil
	}
	return &n
}

// CheckProvider rejects a numeric cap for a provider that cannot enforce one: such a
// deployment must say provider-managed.
func (s MaxDepthSetting) CheckProvider(providerName string, caps Capabilities) error {
	if s.managed || caps.DepthLimit {
		return nil
	}
	return Rejectf(RuleDepthLimitUnsupported,
		"subagent provider %q does not support the %q capability: set maxDepth to %q",
		providerName, CapDepthLimit, ProviderManaged)
}

// String returns `provider-managed` or the cap in decimal.
func (s MaxDepthSetting) String() string {
	n, ok := s.Limit()
	if !ok {
		return ProviderManaged
	}
	return strconv.FormatInt(n, 10)
}

// Set parses v as ParseMaxDepthSetting does.
func (s *MaxDepthSetting) Set(v string) error {
	parsed, err := ParseMaxDepthSetting(v)
	if err != nil {
		return err
	}
	*s = parsed
	return nil
}

// MarshalJSON writes the cap as a number, or the string "provider-managed".
func (s MaxDepthSetting) MarshalJSON() ([]byte, error) {
	n, ok := s.Limit()
	if !ok {
		return json.Marshal(ProviderManaged)
	}
	return json.Marshal(n)
}

// UnmarshalJSON reads a number, or a string ParseMaxDepthSetting accepts. JSON null leaves
// the setting unchanged.
func (s *MaxDepthSetting) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return badMaxDepthSetting(string(b))
		}
		return s.Set(str)
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || !session.IsSafeInteger(f) {
		return badMaxDepthSetting(string(b))
	}
	*s = MaxDepthSetting{limit: int64(f), explicit: true}
	return nil
}
