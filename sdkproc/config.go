package sdkproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent/workdir"
)

// Defaults of Config (contract R-50).
const (
	DefaultProviderName       = "dsh-sdk"
	DefaultProvider           = "deepseek-official"
	DefaultModel              = "deepseek-v4-flash"
	DefaultShutdownTimeoutMs  = 1000
	DefaultDisposeEOFGraceMs  = 6000
	DefaultDisposeGraceMs     = 3000
	DefaultHandshakeTimeoutMs = 10000
)

// messagePrefix starts every message of this provider, as in the upstream package name.
const messagePrefix = "subagent-dsh-sdk"

// Config configures a Provider (contract R-50). The zero value of every field but Command means
// its default, so a Go caller sets only what it needs; LoadConfig additionally rejects an
// explicit zero in JSON, where absence and zero are distinguishable.
type Config struct {
	// ProviderName is the name the provider is registered under; default "dsh-sdk".
	ProviderName string `json:"providerName,omitempty"`
	// Command is the child runtime executable, spawned once per run. Required.
	Command string `json:"command"`
	// Args are the command's arguments.
	Args []string `json:"args,omitempty"`
	// Cwd overrides the child's working directory. Nil (key absent) inherits the parent
	// session's cwd; a pointer to "" is rejected. A relative path resolves against the
	// process cwd at load.
	Cwd *string `json:"cwd,omitempty"`
	// Provider, Model and MaxTokens are the route sent in initialize, overridden field by
	// field by each request's AgentOptions (contract R-83). MaxTokens 0 means no cap.
	Provider  string `json:"provider,omitempty"`
	Model     string `json:"model,omitempty"`
	MaxTokens int64  `json:"maxTokens,omitempty"`
	// Env is set in the child on top of the allowlisted worker environment (contract R-53), as it
	// is: the place for the provider keys the route needs.
	Env map[string]string `json:"env,omitempty"`
	// ChildEnv names worker environment variables the child gets besides the built-in
	// allowlist (contract R-53). A name upstream's denylist drops (containing KEY, PASSWORD,
	// SECRET or TOKEN, or starting with DSH_) is still dropped: such a value goes in Env.
	ChildEnv []string `json:"childEnv,omitempty"`
	// ShutdownTimeoutMs bounds the shutdown request of Dispose; default 1000.
	ShutdownTimeoutMs float64 `json:"shutdownTimeoutMs,omitempty"`
	// DisposeEOFGraceMs is how long Dispose waits for an exit after closing stdin; default 6000.
	DisposeEOFGraceMs float64 `json:"disposeEofGraceMs,omitempty"`
	// DisposeGraceMs is how long Dispose waits after SIGTERM and again after SIGKILL; default 3000.
	DisposeGraceMs float64 `json:"disposeGraceMs,omitempty"`
	// HandshakeTimeoutMs bounds the initialize handshake: a child that has not answered by
	// then is stopped and reaped, and the start fails; default 10000.
	HandshakeTimeoutMs float64 `json:"handshakeTimeoutMs,omitempty"`
	// Protected and Roots are sent in initialize (docs/protocol.md): the worker's state
	// directories, which the child's file tools refuse whatever the cwd, and the workspace
	// roots the child's cwd must resolve under (docs/sdk-children.md); HardLinkRoots, the
	// roots whose hard links the operator trusts (tools.Env.HardLinkRoots). Set by the
	// worker, not read from a config file.
	Protected     []string `json:"-"`
	Roots         []string `json:"-"`
	HardLinkRoots []string `json:"-"`
}

// LoadConfig decodes a JSON config, rejecting unknown keys and explicit zero or non-numeric
// values that Config's zero-means-default fields could not tell apart, then returns it with
// defaults applied and validated (Validate, including the cwd check of R-51).
func LoadConfig(data []byte) (Config, error) {
	// The numeric keys are read raw: `"maxTokens": 1.5` or `"disposeGraceMs": "x"` must yield
	// the contract's messages, not a decoder error, and an explicit 0 is not a default.
	type plain Config
	var file struct {
		plain
		MaxTokens         json.RawMessage `json:"maxTokens"`
		ShutdownTimeoutMs json.RawMessage `json:"shutdownTimeoutMs"`
		DisposeEOFGraceMs json.RawMessage `json:"disposeEofGraceMs"`
		DisposeGraceMs    json.RawMessage `json:"disposeGraceMs"`
		HandshakeTimeout  json.RawMessage `json:"handshakeTimeoutMs"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return Config{}, fmt.Errorf("%s: decode config: %w", messagePrefix, err)
	}
	cfg := Config(file.plain)
	if present(file.MaxTokens) {
		v, err := strconv.ParseFloat(string(file.MaxTokens), 64)
		if err != nil || v != math.Trunc(v) || v < 1 || v > session.MaxSafeInteger {
			return Config{}, errMaxTokens
		}
		cfg.MaxTokens = int64(v)
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *float64
	}{
		{"shutdownTimeoutMs", file.ShutdownTimeoutMs, &cfg.ShutdownTimeoutMs},
		{"disposeEofGraceMs", file.DisposeEOFGraceMs, &cfg.DisposeEOFGraceMs},
		{"disposeGraceMs", file.DisposeGraceMs, &cfg.DisposeGraceMs},
		{"handshakeTimeoutMs", file.HandshakeTimeout, &cfg.HandshakeTimeoutMs},
	} {
		if !present(f.raw) {
			continue
		}
		v, err := strconv.ParseFloat(string(f.raw), 64)
		if err != nil || !isPositiveFinite(v) {
			return Config{}, notPositiveFinite(f.name)
		}
		*f.dst = v
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// present reports whether a raw member was given a value (JSON null counts as absent).
func present(raw json.RawMessage) bool { return raw != nil && string(raw) != "null" }

// Validate checks c as New would, after applying defaults: a command, maxTokens a positive
// safe integer when set, the timeouts positive and finite, and a configured cwd
// usable (contract R-51). Failures of the contract's rules carry its exact messages; the cwd
// failures are *subagent.ValidationError.
func (c Config) Validate() error {
	_, err := c.withDefaults().resolve()
	return err
}

// resolved is a validated Config with the cwd resolved and durations converted.
type resolved struct {
	Config
	cwd              string // resolved config cwd; "" when none is configured
	shutdownTimeout  time.Duration
	eofGrace         time.Duration
	grace            time.Duration
	handshakeTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.ProviderName == "" {
		c.ProviderName = DefaultProviderName
	}
	if c.Provider == "" {
		c.Provider = DefaultProvider
	}
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.ShutdownTimeoutMs == 0 {
		c.ShutdownTimeoutMs = DefaultShutdownTimeoutMs
	}
	if c.DisposeEOFGraceMs == 0 {
		c.DisposeEOFGraceMs = DefaultDisposeEOFGraceMs
	}
	if c.DisposeGraceMs == 0 {
		c.DisposeGraceMs = DefaultDisposeGraceMs
	}
	if c.HandshakeTimeoutMs == 0 {
		c.HandshakeTimeoutMs = DefaultHandshakeTimeoutMs
	}
	return c
}

// resolve validates a Config that already has its defaults.
func (c Config) resolve() (resolved, error) {
	if c.Command == "" {
		return resolved{}, errors.New(messagePrefix + ": command is required (the child runtime executable)")
	}
	if c.MaxTokens < 0 || c.MaxTokens > session.MaxSafeInteger {
		return resolved{}, errMaxTokens
	}
	if err := checkEnvNames(c.ChildEnv); err != nil {
		return resolved{}, err
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"shutdownTimeoutMs", c.ShutdownTimeoutMs},
		{"disposeEofGraceMs", c.DisposeEOFGraceMs},
		{"disposeGraceMs", c.DisposeGraceMs},
		{"handshakeTimeoutMs", c.HandshakeTimeoutMs},
	} {
		if !isPositiveFinite(f.v) {
			return resolved{}, notPositiveFinite(f.name)
		}
	}
	r := resolved{
		Config:           c,
		shutdownTimeout:  millis(c.ShutdownTimeoutMs),
		eofGrace:         millis(c.DisposeEOFGraceMs),
		grace:            millis(c.DisposeGraceMs),
		handshakeTimeout: millis(c.HandshakeTimeoutMs),
	}
	if c.Cwd != nil {
		processCwd, err := os.Getwd()
		if err != nil {
			return resolved{}, fmt.Errorf("%s: resolve config cwd: %w", messagePrefix, err)
		}
		r.cwd, err = workdir.Resolve(workdir.Options{Prefix: messagePrefix, ConfigCwd: c.Cwd, ProcessCwd: processCwd})
		if err != nil {
			return resolved{}, err
		}
	}
	return r, nil
}

var errMaxTokens = errors.New(messagePrefix + " maxTokens must be a positive safe integer")

func isPositiveFinite(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

func notPositiveFinite(name string) error {
	return fmt.Errorf("%s: %s must be a positive finite number", messagePrefix, name)
}

func millis(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
