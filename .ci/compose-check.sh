#!/usr/bin/env bash
# Checks the compose deployment without a container engine (none is available to CI):
#   1. docker-compose.yml is valid and every variable it uses is set (by .env or a default),
#      with Debian's docker-compose;
#   2. the setup step creates exactly the search attributes devserver registers (a Go test);
#   3. the worker image's build command, taken from the Dockerfile, builds the worker from a
#      copy of the build context that honours .dockerignore, and the binary runs.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker-compose >/dev/null; then
  apt-get install -y -qq docker-compose >/dev/null
fi

echo "compose: docker-compose config"
out=$(docker-compose -f docker-compose.yml config -q 2>&1)
if [ -n "$out" ]; then
  echo "$out"
  echo "compose: docker-compose config is not clean" >&2
  exit 1
fi

echo "compose: search attributes"
# The one list is workflows.SearchAttributes; TestSearchAttributesDocumented checks that the
# setup script (and the README's registration command) create exactly those.
go test -count=1 -run '^TestSearchAttributesDocumented$' ./docs >/dev/null

echo "compose: worker image build"
build=$(grep -E '^RUN .*go build ' Dockerfile | sed 's/^RUN //')
if [ "$(printf '%s\n' "$build" | wc -l)" -ne 1 ] || [ -z "$build" ]; then
  echo "compose: want exactly one 'RUN ... go build' line in Dockerfile" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
excludes=()
while IFS= read -r pattern; do
  case "$pattern" in ''|'#'*) continue ;; esac
  excludes+=("--exclude=./${pattern#/}")
done < .dockerignore
mkdir "$tmp/src" "$tmp/out"
tar --anchored "${excludes[@]}" -cf - . | tar -xf - -C "$tmp/src"
for gone in .git test docs; do
  if [ -e "$tmp/src/$gone" ]; then echo "compose: .dockerignore did not keep $gone out" >&2; exit 1; fi
done
(cd "$tmp/src" && eval "${build//\/out\//$tmp/out/}")
bin="$tmp/out/$(basename "$(printf '%s\n' "$build" | grep -o -- '-o [^ ]*' | cut -d' ' -f2)")"
"$bin" -h 2>"$tmp/usage" || true
if ! grep -q -- '-metrics-addr' "$tmp/usage"; then
  cat "$tmp/usage"
  echo "compose: the built worker did not print its usage" >&2
  exit 1
fi
if ! grep -qx 'sha-[0-9a-f]\{12\}' "$tmp/out/build-id"; then
  echo "compose: the worker image's build id is not sha-<12 hex digits>: $(cat "$tmp/out/build-id" 2>&1)" >&2
  exit 1
fi
echo "compose: ok ($(du -h "$bin" | cut -f1) worker binary, build id $(cat "$tmp/out/build-id"))"
