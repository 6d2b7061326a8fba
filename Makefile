# Race-checked packages: everything with goroutines of its own and no embedded server
# (the race build of the Temporal server would take longer than the tests themselves).
RACE_PKGS = ./subagent/... ./harness/... ./sdkproc/... ./inprocess/...
FUZZTIME ?= 10s

.PHONY: test check fuzz bench

# test is the README's test command: every test, the runtime packages again under -race,
# and a short run of each fuzz target.
test:
	go test -count=1 ./...
	go test -count=1 -race $(RACE_PKGS)
	$(MAKE) fuzz

# check is what CI runs before the tests.
check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt wants to rewrite:"; echo "$$out"; exit 1; fi
	go vet ./...

fuzz:
	@grep -l '^func Fuzz' $$(git ls-files '*_test.go') 2>/dev/null | while read -r file; do \
	  dir=./$$(dirname $$file); \
	  for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
	    echo "fuzz $$dir $$f ($(FUZZTIME))"; \
	    go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s $$dir || exit 1; \
	  done; \
	done

bench:
	go test -run '^$$' -bench . -benchmem ./...
