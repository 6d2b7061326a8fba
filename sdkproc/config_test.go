package sdkproc

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/subagent"
)

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := LoadConfig([]byte(`{"command": "subflow-agent"}`))
	require.NoError(t, err)
	assert.Equal(t, Config{
		ProviderName:       "dsh-sdk",
		Command:            "subflow-agent",
		Provider:           "deepseek-official",
		Model:              "deepseek-v4-flash",
		ShutdownTimeoutMs:  1000,
		DisposeEOFGraceMs:  6000,
		DisposeGraceMs:     3000,
		HandshakeTimeoutMs: 10000,
	}, cfg)

	p, err := New(cfg, Options{})
	require.NoError(t, err)
	assert.Equal(t, "dsh-sdk", p.Name())
	assert.Equal(t, subagent.Capabilities{}, p.Capabilities(), "sdk: all four capabilities false (R-3)")
}

func TestLoadConfigFields(t *testing.T) {
	dir := t.TempDir()
	cfg, err := LoadConfig([]byte(`{"providerName": "remote", "command": "c", "args": ["a", "b"],
		"cwd": "` + dir + `", "provider": "scripted", "model": "m", "maxTokens": 1e3,
		"env": {"DEEPSEEK_API_KEY": "k"}, "shutdownTimeoutMs": 1.5, "disposeEofGraceMs": 2,
		"disposeGraceMs": 3, "maxTokens": 4096}`))
	require.NoError(t, err)
	assert.Equal(t, "remote", cfg.ProviderName)
	assert.Equal(t, []string{"a", "b"}, cfg.Args)
	assert.Equal(t, dir, *cfg.Cwd)
	assert.Equal(t, int64(4096), cfg.MaxTokens)
	assert.Equal(t, map[string]string{"DEEPSEEK_API_KEY": "k"}, cfg.Env)
	assert.Equal(t, 1.5, cfg.ShutdownTimeoutMs)
}

func TestConfigValidationMessages(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	const maxTokens = "subagent-dsh-sdk maxTokens must be a positive safe integer"
	for _, tc := range []struct {
		name, json, want string
	}{
		{"command missing", `{}`, "subagent-dsh-sdk: command is required (the child runtime executable)"},
		{"maxTokens zero", `{"command": "c", "maxTokens": 0}`, maxTokens},
		{"maxTokens negative", `{"command": "c", "maxTokens": -1}`, maxTokens},
		{"maxTokens fraction", `{"command": "c", "maxTokens": 1.5}`, maxTokens},
		{"maxTokens unsafe", `{"command": "c", "maxTokens": 9007199254740992}`, maxTokens},
		{"maxTokens string", `{"command": "c", "maxTokens": "10"}`, maxTokens},
		{"shutdown zero", `{"command": "c", "shutdownTimeoutMs": 0}`, "subagent-dsh-sdk: shutdownTimeoutMs must be a positive finite number"},
		{"eof negative", `{"command": "c", "disposeEofGraceMs": -5}`, "subagent-dsh-sdk: disposeEofGraceMs must be a positive finite number"},
		{"grace string", `{"command": "c", "disposeGraceMs": "3000"}`, "subagent-dsh-sdk: disposeGraceMs must be a positive finite number"},
		{"grace huge", `{"command": "c", "disposeGraceMs": 1e400}`, "subagent-dsh-sdk: disposeGraceMs must be a positive finite number"},
		{"handshake zero", `{"command": "c", "handshakeTimeoutMs": 0}`, "subagent-dsh-sdk: handshakeTimeoutMs must be a positive finite number"},
		{"cwd empty", `{"command": "c", "cwd": ""}`, "subagent-dsh-sdk: config cwd must not be empty — omit the key to inherit the parent session cwd"},
		{"cwd missing", `{"command": "c", "cwd": "no/such/dir"}`, "subagent-dsh-sdk: config cwd is not an accessible directory: " + filepath.Join(wd, "no/such/dir")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig([]byte(tc.json))
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}

	t.Run("unknown key", func(t *testing.T) {
		_, err := LoadConfig([]byte(`{"command": "c", "comand": "typo"}`))
		require.ErrorContains(t, err, `unknown field "comand"`)
	})
	t.Run("cwd errors are validation errors", func(t *testing.T) {
		_, err := LoadConfig([]byte(`{"command": "c", "cwd": ""}`))
		var ve *subagent.ValidationError
		require.True(t, errors.As(err, &ve))
		assert.Equal(t, subagent.RuleEmptyCwd, ve.Rule)
	})
}

func TestConfigValidateGo(t *testing.T) {
	base := Config{Command: "c"}
	require.NoError(t, base.Validate(), "zero fields take their defaults")

	bad := base
	bad.MaxTokens = -1
	assert.EqualError(t, bad.Validate(), "subagent-dsh-sdk maxTokens must be a positive safe integer")
	bad = base
	bad.DisposeGraceMs = math.Inf(1)
	assert.EqualError(t, bad.Validate(), "subagent-dsh-sdk: disposeGraceMs must be a positive finite number")
	bad = base
	bad.ShutdownTimeoutMs = math.NaN()
	assert.EqualError(t, bad.Validate(), "subagent-dsh-sdk: shutdownTimeoutMs must be a positive finite number")
	_, err := New(Config{}, Options{})
	assert.EqualError(t, err, "subagent-dsh-sdk: command is required (the child runtime executable)")
}

func TestChildEnvNamesValidated(t *testing.T) {
	for _, name := range []string{"", "A=B"} {
		err := Config{Command: "x", ChildEnv: []string{name}}.Validate()
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("childEnv name %q", name))
	}
}

func TestStripUserinfo(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:p@proxy:3128":            "http://proxy:3128",
		"http://u:p@proxy:3128/path?q=a@b": "http://proxy:3128/path?q=a@b",
		"u:p@proxy:3128":                   "proxy:3128",
		"socks5://proxy":                   "socks5://proxy",
		"localhost,a@b.internal":           "localhost,b.internal",
		"http://us%40er:p@ss@proxy":        "http://proxy",
	} {
		assert.Equal(t, want, stripUserinfo(in), in)
	}
}
