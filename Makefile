# Race-checked packages: everything with goroutines of its own and no embedded server
# (the race build of the Temporal server would take longer than the tests themselves).
RACE_PKGS = ./subagent/... ./harness/... ./sdkproc/... ./inprocess/... ./internal/wire/... ./internal/childruntime/...
# PKGS is every package of the workspace (go.work): the library module at the root, and the
# modules that carry the embedded Temporal server's requirements so that a user's module importing
# the library never does: devserver, starter, test, bench, docs, examples. `./...` alone stops at
# a nested module's folder.
PKGS = ./... ./devserver/... ./starter/... ./test/... ./bench/... ./docs/... ./examples/...
# FUZZTIME is a count of executions per fuzz target, not a duration: with a duration, Go 1.26's
# fuzzing coordinator can fail a target that found nothing ("context deadline exceeded", no
# input written) when its deadline races the workers' shutdown; a count has no deadline to race.
FUZZTIME ?= 100000x
# WORKFLOWCHECK is Temporal's static determinism checker, a module of its own (it adds nothing to
# ours); `make check` runs it over every package that declares workflows.
WORKFLOWCHECK = go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0

.PHONY: test check fuzz bench

# POSTGRES_ENV makes the Postgres session store's tests run: with SUBFLOW_TEST_POSTGRES unset,
# as root with Debian's postgresql binaries installed, it starts the local server
# (.ci/postgres.sh) and sets the variable; otherwise it says loudly that those tests skip.
POSTGRES_ENV = if [ -z "$$SUBFLOW_TEST_POSTGRES" ]; then \
	  if [ "$$(id -u)" = 0 ] && ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then \
	    pgenv=$$(.ci/postgres.sh) || exit 1; eval "$$pgenv"; \
	  else \
	    echo '*** NOTICE: SUBFLOW_TEST_POSTGRES is unset: the PostgreSQL tests will SKIP. Start a server with: eval "$$(sudo .ci/postgres.sh)" ***'; \
	  fi; \
	fi

# test is the README's test command: every test (the Postgres ones too, see POSTGRES_ENV),
# the runtime packages again under -race, and a short run of each fuzz target. The end-to-end
# package (test/) alone runs for about six minutes on 2 cores, its parallel tests four at a time
# (test/main_test.go).
test:
	@$(POSTGRES_ENV); set -x; go test -count=1 -timeout 45m $(PKGS) && go test -count=1 -race $(RACE_PKGS)
	$(MAKE) fuzz

# check is what CI runs before the tests: formatting, vet on Linux and macOS (the Linux-only
# pieces sit behind build tags with a portable fallback; the macOS vet compiles every
# dependency again for macOS, unoptimized since vet reads only their types: cold on a slow
# 2-core machine, 7 min 51 s against 13 min optimized), and the structure tests: workflow
# code reaches no I/O package, the documented package graph matches `go list`, the
# search-attribute list of the deploy script and the README matches the Go one, every rule id a
# file cites is defined in docs/contract.md, every path, package and identifier the docs name
# exists, and workflowcheck finds no non-determinism; and the replay gate (`worker replay`,
# docs/deployment.md) over the recorded histories, as a deploy pipeline runs it.
check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt wants to rewrite:"; echo "$$out"; exit 1; fi
	go vet $(PKGS)
	GOOS=darwin go vet -gcflags='all=-N -l' $(PKGS)
	go test -count=1 -run 'TestWorkflowsStayPure|TestPackageGraph|TestSearchAttributes|TestContractCitations|TestDocsName|TestCardLayout|TestDriversKnowNoTemporal' ./workflows ./docs/...
	go run $(WORKFLOWCHECK) -config workflowcheck.config.yaml -show-pos ./workflows/... ./examples/...
	go run ./worker replay --dir workflows/testdata

fuzz:
	@grep -l '^func Fuzz' $$(git ls-files '*_test.go') 2>/dev/null | while read -r file; do \
	  dir=./$$(dirname $$file); \
	  for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
	    echo "fuzz $$dir $$f ($(FUZZTIME))"; \
	    go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s $$dir || exit 1; \
	  done; \
	done

bench:
	go test -run '^$$' -bench . -benchmem $(PKGS)
