package docs

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestContractCitations keeps every reference inside the repository: each rule id that a file
// of the repository cites (R-NN) is defined in contract.md, and no file points a reader at the
// documents the project was written from, which are not in the repository.
func TestContractCitations(t *testing.T) {
	contract, err := os.ReadFile("contract.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)\*\*(R-[0-9]+)\b`).FindAllStringSubmatch(string(contract), -1) {
		defined[m[1]] = true
	}
	if len(defined) == 0 {
		t.Fatal("contract.md defines no rule (a rule starts with **R-NN)")
	}

	out, err := exec.Command("git", "-C", "..", "ls-files", "*.go", "*.md", "*.sh", "Makefile", "*.ts").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	cite := regexp.MustCompile(`\bR-[0-9]+\b`)
	outside := regexp.MustCompile(`\bSPEC\b|SPEC\.md|DESIGN\.md|\bDESIGN\b|\.\./shared`)
	for _, path := range strings.Fields(string(out)) {
		data, err := os.ReadFile("../" + path)
		if err != nil {
			continue // listed but deleted in the work tree
		}
		for n, line := range strings.Split(string(data), "\n") {
			for _, id := range cite.FindAllString(line, -1) {
				if !defined[id] {
					t.Errorf("%s:%d cites %s, which contract.md does not define", path, n+1, id)
				}
			}
			if path != "docs/contract_test.go" && outside.MatchString(line) {
				t.Errorf("%s:%d points outside the repository: %s", path, n+1, strings.TrimSpace(line))
			}
		}
	}
}
