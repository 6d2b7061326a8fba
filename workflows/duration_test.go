package workflows

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDurationDecodesStringsAndNanoseconds(t *testing.T) {
	for in, want := range map[string]time.Duration{
		`"10m"`:        10 * time.Minute,
		`"1h30m"`:      90 * time.Minute,
		`"90s"`:        90 * time.Second,
		`"1.5s"`:       1500 * time.Millisecond,
		`3000000000`:   3 * time.Second, // Go's form, as every history recorded before carries it
		`0`:            0,
		` "250ms" `:    250 * time.Millisecond,
		`"1h2m3s4ms"`:  time.Hour + 2*time.Minute + 3*time.Second + 4*time.Millisecond,
		`600000000000`: 10 * time.Minute,
	} {
		var d Duration
		require.NoError(t, json.Unmarshal([]byte(in), &d), in)
		assert.Equal(t, want, time.Duration(d), in)
	}
}

func TestDurationRejectsOtherValues(t *testing.T) {
	for _, in := range []string{`"ten minutes"`, `"10"`, `""`, `true`, `1.5`, `{}`, `[]`} {
		var in2 StartInput
		err := json.Unmarshal([]byte(`{"timeout": `+in+`}`), &in2)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), `a duration must be a string such as "90s" or "10m", or an integer of nanoseconds`, in)
	}
}

// The encoded form stays Go's integer, which every older worker decodes (see Duration).
func TestDurationEncodesNanoseconds(t *testing.T) {
	data, err := json.Marshal(StartInput{Provider: "spawn", Timeout: Duration(10 * time.Minute)})
	require.NoError(t, err)
	assert.Contains(t, string(data), `"timeout":600000000000`)

	var back StartInput
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, Duration(10*time.Minute), back.Timeout)
}
