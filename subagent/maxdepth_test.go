package subagent

import (
	"encoding/json"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMaxDepthSettingZeroValueIsDefault(t *testing.T) {
	var s MaxDepthSetting
	n, ok := s.Limit()
	assert.True(t, ok)
	assert.Equal(t, int64(DefaultMaxDepth), n)
	assert.Equal(t, ptr(int64(3)), s.MaxDepth())
	assert.Equal(t, "3", s.String())

	var cfg struct {
		MaxDepth MaxDepthSetting `json:"maxDepth"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{}`), &cfg))
	assert.Equal(t, ptr(int64(3)), cfg.MaxDepth.MaxDepth(), "an absent key means the default")
	require.NoError(t, json.Unmarshal([]byte(`{"maxDepth": null}`), &cfg))
	assert.Equal(t, ptr(int64(3)), cfg.MaxDepth.MaxDepth())
}

func TestParseMaxDepthSetting(t *testing.T) {
	tests := []struct {
		in      string
		managed bool
		limit   int64
		msg     string
	}{
		{in: "0", limit: 0},
		{in: " 5 ", limit: 5},
		{in: "9007199254740991", limit: maxSafe},
		{in: "provider-managed", managed: true},
		{in: "-1", msg: `subagent maxDepth must be a non-negative safe integer or "provider-managed": -1`},
		{in: "9007199254740992", msg: `subagent maxDepth must be a non-negative safe integer or "provider-managed": 9007199254740992`},
		{in: "2.5", msg: `subagent maxDepth must be a non-negative safe integer or "provider-managed": 2.5`},
		{in: "", msg: `subagent maxDepth must be a non-negative safe integer or "provider-managed": `},
		{in: "Provider-Managed", msg: `subagent maxDepth must be a non-negative safe integer or "provider-managed": Provider-Managed`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := ParseMaxDepthSetting(tt.in)
			if tt.msg != "" {
				require.EqualError(t, err, tt.msg)
				var ve *ValidationError
				require.ErrorAs(t, err, &ve)
				assert.Equal(t, RuleInvalidMaxDepthConfig, ve.Rule)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.managed, s.IsProviderManaged())
			if tt.managed {
				assert.Nil(t, s.MaxDepth(), "provider-managed sends no cap")
				assert.Equal(t, "provider-managed", s.String())
				return
			}
			assert.Equal(t, &tt.limit, s.MaxDepth())
		})
	}
}

func TestMaxDepthLimit(t *testing.T) {
	s, err := MaxDepthLimit(0)
	require.NoError(t, err)
	assert.Equal(t, ptr(int64(0)), s.MaxDepth(), "0 is a real cap that forbids delegation")
	_, err = MaxDepthLimit(-3)
	require.EqualError(t, err, `subagent maxDepth must be a non-negative safe integer or "provider-managed": -3`)
}

func TestMaxDepthSettingJSON(t *testing.T) {
	tests := []struct {
		in   string
		want string // re-encoded
		msg  string
	}{
		{in: `4`, want: `4`},
		{in: `0`, want: `0`},
		{in: `2.0`, want: `2`},
		{in: `"provider-managed"`, want: `"provider-managed"`},
		{in: `"7"`, want: `7`},
		{in: `-1`, msg: `subagent maxDepth must be a non-negative safe integer or "provider-managed": -1`},
		{in: `1.5`, msg: `subagent maxDepth must be a non-negative safe integer or "provider-managed": 1.5`},
		{in: `1e300`, msg: `subagent maxDepth must be a non-negative safe integer or "provider-managed": 1e300`},
		{in: `true`, msg: `subagent maxDepth must be a non-negative safe integer or "provider-managed": true`},
		{in: `"unlimited"`, msg: `subagent maxDepth must be a non-negative safe integer or "provider-managed": unlimited`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var s MaxDepthSetting
			err := json.Unmarshal([]byte(tt.in), &s)
			if tt.msg != "" {
				require.EqualError(t, err, tt.msg)
				return
			}
			require.NoError(t, err)
			raw, err := json.Marshal(s)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(raw))
		})
	}
}

func TestMaxDepthSettingIsAFlag(t *testing.T) {
	var s MaxDepthSetting
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.Var(&s, "max-depth", "")
	require.NoError(t, fs.Parse([]string{"--max-depth", "provider-managed"}))
	assert.True(t, s.IsProviderManaged())
	require.NoError(t, fs.Parse([]string{"--max-depth", "1"}))
	assert.Equal(t, ptr(int64(1)), s.MaxDepth())
}

func TestMaxDepthSettingCheckProvider(t *testing.T) {
	numeric, err := MaxDepthLimit(2)
	require.NoError(t, err)
	const msg = `subagent provider "dsh-sdk" does not support the "depthLimit" capability: set maxDepth to "provider-managed"`

	assert.NoError(t, numeric.CheckProvider("spawn", allCaps))
	assert.NoError(t, ProviderManagedDepth().CheckProvider("dsh-sdk", noCaps))
	assert.NoError(t, ProviderManagedDepth().CheckProvider("spawn", allCaps))

	for name, s := range map[string]MaxDepthSetting{"explicit": numeric, "default": {}} {
		t.Run(name, func(t *testing.T) {
			err := s.CheckProvider("dsh-sdk", noCaps)
			require.EqualError(t, err, msg)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, RuleDepthLimitUnsupported, ve.Rule)
		})
	}
}
