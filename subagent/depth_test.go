package subagent

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const maxSafe = int64(1<<53 - 1)

func TestChildDepth(t *testing.T) {
	tests := []struct {
		name     string
		stored   int64
		runtime  *float64
		maxDepth *int64
		want     int64
		rule     string
		msg      string
	}{
		{name: "top level", want: 1},
		{name: "stored depth", stored: 2, want: 3},
		{name: "runtime deepens", stored: 1, runtime: ptr(4.0), want: 5},
		{name: "runtime never lowers", stored: 4, runtime: ptr(1.0), want: 5},
		{name: "within maxDepth", stored: 2, maxDepth: ptr(int64(3)), want: 3},
		{name: "maxDepth 0 forbids delegation", maxDepth: ptr(int64(0)),
			rule: RuleDepthExceeded, msg: "subagent depth 1 exceeds maxDepth 0"},
		{name: "past maxDepth", stored: 3, maxDepth: ptr(int64(3)),
			rule: RuleDepthExceeded, msg: "subagent depth 4 exceeds maxDepth 3"},
		{name: "runtime pushes past maxDepth", stored: 1, runtime: ptr(5.0), maxDepth: ptr(int64(3)),
			rule: RuleDepthExceeded, msg: "subagent depth 6 exceeds maxDepth 3"},
		{name: "negative runtime", runtime: ptr(-1.0),
			rule: RuleInvalidRuntimeDepth, msg: "agent subagentDepth must be a non-negative safe integer"},
		{name: "fractional runtime", runtime: ptr(1.5),
			rule: RuleInvalidRuntimeDepth, msg: "agent subagentDepth must be a non-negative safe integer"},
		{name: "NaN runtime", runtime: ptr(math.NaN()),
			rule: RuleInvalidRuntimeDepth, msg: "agent subagentDepth must be a non-negative safe integer"},
		{name: "infinite runtime", runtime: ptr(math.Inf(1)),
			rule: RuleInvalidRuntimeDepth, msg: "agent subagentDepth must be a non-negative safe integer"},
		{name: "runtime past 2^53-1", runtime: ptr(float64(1 << 53)),
			rule: RuleInvalidRuntimeDepth, msg: "agent subagentDepth must be a non-negative safe integer"},
		{name: "stored at the safe limit overflows", stored: maxSafe,
			rule: RuleDepthOverflow, msg: "subagent child depth exceeds the safe-integer range"},
		{name: "runtime at the safe limit overflows", runtime: ptr(float64(maxSafe)),
			rule: RuleDepthOverflow, msg: "subagent child depth exceeds the safe-integer range"},
		{name: "last representable child", stored: maxSafe - 1, want: maxSafe},
		{name: "negative stored depth", stored: -1,
			rule: RuleInvalidStoredDepth, msg: "session delegationDepth must be a non-negative safe integer"},
		{name: "invalid maxDepth", maxDepth: ptr(int64(-2)),
			rule: RuleInvalidMaxDepth, msg: "subagent maxDepth must be a non-negative safe integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ChildDepth(tt.stored, tt.runtime, tt.maxDepth)
			if tt.msg == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.EqualError(t, err, tt.msg)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve, "every depth failure is a ValidationError")
			assert.Equal(t, tt.rule, ve.Rule)
			assert.Equal(t, tt.msg, ve.Message)
		})
	}
}

func TestDepthErrorCarriesBothNumbers(t *testing.T) {
	_, err := ChildDepth(3, nil, ptr(int64(2)))
	var de *DepthError
	require.True(t, errors.As(err, &de))
	assert.Equal(t, &DepthError{Attempted: 4, Max: 2}, de)
	assert.Equal(t, RuleDepthExceeded, de.Rule())
}
