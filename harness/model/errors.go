package model

import (
	"fmt"
	"net/http"
	"strings"
)

// APIError is a model request the provider's server refused with an HTTP error status. Callers
// branch on StatusCode (401/403: bad key, 429: rate limited, 5xx: server trouble).
type APIError struct {
	Provider   string
	Model      string
	StatusCode int
	// RetryAfter is the server's Retry-After header, verbatim, when it sent one.
	RetryAfter string
	// KeyEnv names the environment variable the API key came from; empty when the key was given
	// directly.
	KeyEnv string
	// Message is the provider's own error message from the response body, if any.
	Message string
}

// Error says what the provider refused and, for a rejected key, which variable to check.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s model %q: ", e.Provider, e.Model)
	status := fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	switch {
	case e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden:
		fmt.Fprintf(&b, "API key rejected (%s)", status)
		if e.KeyEnv != "" {
			fmt.Fprintf(&b, "; check %s", e.KeyEnv)
		}
		// The provider's message is left out on purpose: some echo part of the key.
		return b.String()
	case e.StatusCode == http.StatusTooManyRequests:
		fmt.Fprintf(&b, "rate limited (%s)", status)
		if e.RetryAfter != "" {
			fmt.Fprintf(&b, "; retry after %s", retryAfterText(e.RetryAfter))
		}
	case e.StatusCode >= 500:
		fmt.Fprintf(&b, "server error (%s)", status)
	default:
		fmt.Fprintf(&b, "request rejected (%s)", status)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

// retryAfterText renders a Retry-After value: delta-seconds get a unit, an HTTP date stays as is.
func retryAfterText(v string) string {
	for _, r := range v {
		if r < '0' || r > '9' {
			return v
		}
	}
	return v + "s"
}

// MissingAPIKeyError is a request to a provider that has no API key configured. It is reported
// at request time, not at registration, so setups that never call the provider still work.
type MissingAPIKeyError struct {
	Provider string
	Model    string
	// KeyEnv is the environment variable to set.
	KeyEnv string
}

// Error names the variable to set.
func (e *MissingAPIKeyError) Error() string {
	if e.KeyEnv == "" {
		return fmt.Sprintf("%s model %q: no API key configured", e.Provider, e.Model)
	}
	return fmt.Sprintf("%s model %q: no API key: set %s", e.Provider, e.Model, e.KeyEnv)
}
