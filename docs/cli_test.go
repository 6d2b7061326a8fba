package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCLIFlagsDocumented checks that cli.md documents every flag of the worker program, of
// its subcommands and of every starter subcommand (the keys of starter/internal/cli/cli.go's
// commands map, batchCommands in its batch_control.go, the deployment subcommands), as the real
// binaries' -h lists them. A flag of `starter batch results` is documented when a paragraph
// or table row of cli.md that names `starter batch results` (or its parent, `starter batch`)
// holds `--out`; a table row counts with the caption above its table.
func TestCLIFlagsDocumented(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), module+"/starter", module+"/worker")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	commands := [][]string{{"worker"}}
	for _, sub := range []string{"replay", "child-runtime", "version"} {
		commands = append(commands, []string{"worker", sub})
	}
	for _, sub := range mapKeys(t, "../starter/internal/cli/cli.go", `var commands = map\[string\]command\{([^}]*)\}`) {
		commands = append(commands, []string{"starter", sub})
	}
	nested := map[string][]string{
		"batch":      mapKeys(t, "../starter/internal/cli/batch_control.go", `batchCommands = map\[string\]command\{([^}]*)\}`),
		"deployment": mapKeys(t, "../starter/internal/cli/deployment.go", `want := map\[string\]int\{([^}]*)\}`),
	}
	for parent, subs := range nested {
		if len(subs) == 0 {
			t.Fatalf("found no subcommands of starter %s", parent)
		}
		for _, sub := range subs {
			commands = append(commands, []string{"starter", parent, sub})
		}
	}
	if len(commands) < 15 {
		t.Fatalf("found only %d commands: %v", len(commands), commands)
	}

	doc, err := os.ReadFile("cli.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := docBlocks(string(doc))
	for _, cmd := range commands {
		out, _ := exec.Command(filepath.Join(bin, cmd[0]), append(slices.Clone(cmd[1:]), "-h")...).CombinedOutput()
		name := strings.Join(cmd, " ")
		flags := helpFlags(string(out))
		if name == "worker" && len(flags) == 0 {
			t.Fatalf("worker -h lists no flags:\n%s", out)
		}
		scopes := []string{name}
		if len(cmd) > 2 {
			scopes = append(scopes, strings.Join(cmd[:2], " "))
		}
		for _, f := range flags {
			if !documented(blocks, scopes, f) {
				t.Errorf("cli.md does not document --%s of `%s`", f, name)
			}
		}
	}
}

// mapKeys returns the quoted keys of the map literal that pattern's group captures in file.
func mapKeys(t *testing.T, file, pattern string) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(pattern).FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s: no match for %s", file, pattern)
	}
	var keys []string
	for _, k := range regexp.MustCompile(`"([a-z-]+)":`).FindAllSubmatch(m[1], -1) {
		keys = append(keys, string(k[1]))
	}
	return keys
}

// helpFlags parses the flag names out of the flag package's usage output ("  -name type").
func helpFlags(help string) []string {
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]*)`).FindAllStringSubmatch(help, -1) {
		flags = append(flags, m[1])
	}
	return flags
}

// docBlocks splits markdown into paragraphs and table rows, each row prefixed by the
// paragraph before its table.
func docBlocks(doc string) []string {
	var blocks []string
	caption := ""
	for _, para := range strings.Split(doc, "\n\n") {
		para = strings.Trim(para, "\n")
		if !strings.HasPrefix(para, "|") {
			blocks = append(blocks, para)
			caption = para
			continue
		}
		for _, row := range strings.Split(para, "\n") {
			blocks = append(blocks, caption+"\n"+row)
		}
	}
	return blocks
}

// documented reports whether a block naming one of scopes (as "`scope", followed by a space,
// a backtick or ']') mentions --flag (or -flag).
func documented(blocks, scopes []string, flag string) bool {
	mention := regexp.MustCompile(`(^|[^A-Za-z0-9-])--?` + regexp.QuoteMeta(flag) + `($|[^A-Za-z0-9-])`)
	for _, b := range blocks {
		for _, s := range scopes {
			if regexp.MustCompile("`"+regexp.QuoteMeta(s)+"[ `\\]]").MatchString(b) && mention.MatchString(b) {
				return true
			}
		}
	}
	return false
}
