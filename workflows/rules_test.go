package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/subagent"
)

// declaredRules returns the value of every Rule… string constant the non-test files of the
// package in dir declare.
func declaredRules(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	var values []string
	for _, pkg := range pkgs {
		for _, file := range pkg.Files {
			for _, decl := range file.Decls {
				gen, ok := decl.(*ast.GenDecl)
				if !ok || gen.Tok != token.CONST {
					continue
				}
				for _, spec := range gen.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !strings.HasPrefix(name.Name, "Rule") || !ok || lit.Kind != token.STRING {
							continue
						}
						v, err := strconv.Unquote(lit.Value)
						require.NoError(t, err)
						values = append(values, v)
					}
				}
			}
		}
	}
	slices.Sort(values)
	return values
}

// TestRejectionRulesAreListedOnce: every rule declared in package subagent or here is listed
// once (subagent.Rules, then this package's rules), so retry policies and Rejection know it.
func TestRejectionRulesAreListedOnce(t *testing.T) {
	assert.Equal(t, declaredRules(t, "../subagent"), slices.Sorted(slices.Values(subagent.Rules())), "subagent.Rules lists every rule of package subagent")
	all := RejectionRules()
	want := append(declaredRules(t, "../subagent"), declaredRules(t, ".")...)
	slices.Sort(want)
	assert.Equal(t, want, slices.Sorted(slices.Values(all)), "RejectionRules lists every rule declared, each once")
}

// TestEveryRuleIsANonRetryableApplicationError: every rule travels through Temporal as a
// non-retryable ApplicationError whose type is the rule, no retry policy retries it, and
// Rejection gives it back with its exact message.
func TestEveryRuleIsANonRetryableApplicationError(t *testing.T) {
	for _, rule := range RejectionRules() {
		err := ToApplicationError(subagent.Rejectf(rule, "message of %s", rule))
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr, rule)
		assert.Equal(t, rule, appErr.Type())
		assert.True(t, appErr.NonRetryable(), rule)
		assert.Equal(t, &subagent.ValidationError{Rule: rule, Message: "message of " + rule}, Rejection(err))
		assert.Contains(t, shortRetry().NonRetryableErrorTypes, rule)
		assert.Contains(t, driveOptions("", 1, 0).RetryPolicy.NonRetryableErrorTypes, rule)
	}
}

// TestEveryRuleHasAMessageInTheTable: the rejection table of docs/json.md, which gives each
// rule's exact message, has a row for every rule and none for a rule that does not exist.
func TestEveryRuleHasAMessageInTheTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "json.md"))
	require.NoError(t, err)
	text := string(doc)
	start := strings.Index(text, "## Errors: rejections")
	require.GreaterOrEqual(t, start, 0, "docs/json.md has no section \"Errors: rejections\"")
	section := text[start:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	code := regexp.MustCompile("`([^`]+)`")
	var listed []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.Trim(cells[1], " -") == "" || strings.TrimSpace(cells[1]) == "type" {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			listed = append(listed, m[1])
		}
		assert.NotEmpty(t, strings.TrimSpace(cells[2]), "docs/json.md: the row of %s gives no message", cells[1])
	}
	slices.Sort(listed)
	assert.Equal(t, slices.Sorted(slices.Values(RejectionRules())), listed, "docs/json.md's rejection table names every rule once")
}
