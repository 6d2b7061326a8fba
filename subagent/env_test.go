package subagent

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestScrubEnv(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/u",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"LC_CTYPE=C.UTF-8",
		"HTTP_PROXY=http://proxy:3128",
		"HTTPS_PROXY=http://proxy:3128",
		"NO_PROXY=localhost",
		"no_proxy=localhost",
		"TERM=xterm",
		"DEEPSEEK_API_KEY=sk-parent",
		"OPENAI_API_KEY=sk-other",
		"github_token=ghp",
		"DB_PASSWORD=pw",
		"AWS_SECRET_ACCESS_KEY=aws",
		"MySecretThing=x",
		"KEYRING=x",
		"DSH_HOME=/dsh",
		"dsh_debug=1",
		"NOT_DSH_SETTING=kept",
		"MALFORMED",
		"=C:=C:\\",
		"EMPTY=",
		"TERM=screen",
	}
	extra := map[string]string{
		"DEEPSEEK_API_KEY": "sk-explicit",
		"DSH_LOG":          "debug",
		"HOME":             "/child-home",
	}
	got := ScrubEnv(environ, "DSH_", extra)
	assert.Equal(t, []string{
		"DEEPSEEK_API_KEY=sk-explicit",
		"DSH_LOG=debug",
		"EMPTY=",
		"HOME=/child-home",
		"HTTPS_PROXY=http://proxy:3128",
		"HTTP_PROXY=http://proxy:3128",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"LC_CTYPE=C.UTF-8",
		"NOT_DSH_SETTING=kept",
		"NO_PROXY=localhost",
		"PATH=/usr/bin:/bin",
		"TERM=screen",
		"no_proxy=localhost",
	}, got)
}

func TestScrubEnvEmptyPrefixDropsOnlySecrets(t *testing.T) {
	got := ScrubEnv([]string{"DSH_HOME=/d", "API_TOKEN=t", "PATH=/bin"}, "", nil)
	assert.Equal(t, []string{"DSH_HOME=/d", "PATH=/bin"}, got)
	assert.Equal(t, []string{}, ScrubEnv(nil, "DSH_", nil))
}
