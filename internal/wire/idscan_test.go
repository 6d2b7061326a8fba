package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scanRequest runs the id scanner over line, fed in pieces of n bytes.
func scanRequest(line []byte, n int) (json.RawMessage, bool) {
	var s idScanner
	for len(line) > 0 {
		k := min(n, len(line))
		s.feed(line[:k])
		line = line[k:]
	}
	return s.request()
}

func TestIDScanner(t *testing.T) {
	for _, c := range []struct {
		line string
		id   string // "" when not a request
	}{
		{`{"id":1,"method":"m"}`, `1`},
		{`{"method":"m","params":{"id":2,"x":[{"id":3}]},"id":"s\"q"}`, `"s\"q"`},
		{` { "id" : -1.5e3 , "method" : "m" } `, `-1.5e3`},
		{`{"id":null,"method":"m"}`, `null`},
		{`{"id":{"a":1},"method":"m"}`, `null`},
		{`{"id":1}`, ``},
		{`{"method":"m"}`, ``},
		{`{"params":{"id":1,"method":"m"}}`, ``},
		{`[{"id":1,"method":"m"}]`, ``},
		{`{"i\"d":1,"method":"m","id":4}`, `4`},
		// Members are matched as encoding/json matches them to fields: without regard to
		// case, and with their escapes decoded.
		{`{"id":7,"meThod":"m"}`, `7`},
		{`{"ID":8,"Method":"m"}`, `8`},
		{`{"\u0069d":9,"\u006d\u0065\u0074\u0068\u006f\u0064":"m"}`, `9`},
		{`{"\u0069d2":10,"method":"m"}`, ``},
		{`{"id":"` + strings.Repeat("x", MaxIDBytes) + `","method":"m"}`, `null`},
		{`{"id":5,"method":"m","params":` + strings.Repeat(`{"a":`, 50_000), `5`},
	} {
		for _, n := range []int{1, 3, 1 << 20} {
			id, ok := scanRequest([]byte(c.line), n)
			if c.id == "" {
				assert.False(t, ok, "%.60s", c.line)
				continue
			}
			require.True(t, ok, "%.60s", c.line)
			assert.Equal(t, c.id, string(id), "%.60s", c.line)
		}
	}
}

// FuzzIDScanner checks the scanner against encoding/json on every object it can decode: the
// same id for a request with a string or number id, and never a panic on anything.
func FuzzIDScanner(f *testing.F) {
	for _, s := range []string{`{"id":1,"method":"m"}`, `{"method":"m","id":"a\\\"b"}`, `{"id":[1],"method":"x"}`,
		`{"a":{"id":2},"id":3,"method":""}`, `{"id" : 1e5 ,"method":"m","params":[[[]]]}`, `{"id":1,"id":2,"method":"m"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		id, ok := scanRequest(line, 7)
		var m Message
		if bytes.ContainsAny(line, "\n") || json.Unmarshal(line, &m) != nil || bytes.Count(line, []byte(`"id"`)) != 1 {
			return // duplicate members and escaped keys are where decoders may differ
		}
		if m.ID == nil || m.Method == "" {
			return
		}
		require.True(t, ok, "a request the decoder reads is one for the scanner: %q", line)
		raw := bytes.TrimSpace(m.ID)
		if (raw[0] == '"' || raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && len(raw) <= MaxIDBytes {
			assert.Equal(t, string(raw), string(id))
		} else {
			assert.Equal(t, "null", string(id))
		}
	})
}
