package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A binary that embeds the worker exposes no profiles on http.DefaultServeMux: only
// --pprof-addr serves them.
func TestProfilesOnlyWhereAsked(t *testing.T) {
	_, pattern := http.DefaultServeMux.Handler(httptest.NewRequest(http.MethodGet, ProfilesPath+"heap", nil))
	assert.Empty(t, pattern, "the default mux serves profiles")

	p, err := ServeProfiles("127.0.0.1:0")
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + p.Addr() + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}

	code, body := get(ProfilesPath)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, ProfilesPath+"goroutine\t")
	code, body = get(ProfilesPath + "heap?debug=1&gc=1")
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, strings.HasPrefix(body, "heap profile:"), "%.80s", body)
	code, body = get(ProfilesPath + "goroutine")
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, strings.HasPrefix(body, "\x1f\x8b"), "a gzipped protobuf profile, as go tool pprof reads")
	code, body = get(ProfilesPath + "profile?seconds=1")
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, strings.HasPrefix(body, "\x1f\x8b"), "a CPU profile")

	code, body = get(ProfilesPath + "nope")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, `no profile "nope"`)
	code, body = get(ProfilesPath + "profile?seconds=forever")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, `seconds="forever"`)
}
