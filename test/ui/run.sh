#!/usr/bin/env bash
# UI check: starts `starter dev` (embedded Temporal server, its Web UI and a worker), runs a
# completed, a structured, an sdk and a cancelled delegation with the scripted model, then
# loads the Temporal Web UI in headless Chromium and checks the rendered DOM:
#   - the workflow list filtered by SubagentStopReason shows exactly the runs that ended so;
#   - a run's page shows its summary, its search attributes and its activities;
#   - a running delegation's pending activity shows its heartbeat line ("running: step …");
#   - a run that delegated through the subagent tool lists its nested runs (child workflows)
#     on its Relationships page;
#   - a run's Current Details (User Metadata) show its digest: its steps, a failed tool call
#     with its error, and the link to its nested run;
#   - a batch's Current Details show its page mid-way: tasks by state, rate, the last failed
#     task with its link.
# Screenshots of those pages are written to docs/img/ (the README shows them).
#
#   bash test/ui/run.sh           (installs Debian's chromium when it is missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/test/ui
img=$root/docs/img

if ! command -v chromium >/dev/null; then
  apt-get install -y -qq chromium >/dev/null
fi
# cdp.js needs only Node.js itself (no npm packages); machines of this kind ship it, Debian's
# package covers one that does not.
if ! command -v node >/dev/null; then
  apt-get install -y -qq nodejs >/dev/null
fi

tmp=$(mktemp -d)
dev_pid=
cleanup() {
  if [ -n "$dev_pid" ]; then kill "$dev_pid" 2>/dev/null || true; wait "$dev_pid" 2>/dev/null || true; fi
  if [ -z "${UI_KEEP:-}" ]; then rm -rf "$tmp"; else echo "ui: kept $tmp"; fi
}
trap cleanup EXIT
fail() { echo "ui: FAIL: $*" >&2; exit 1; }

echo "ui: building the starter"
go build -o "$tmp/starter" ./starter
starter=$tmp/starter

# Port 0: the starter picks free ports and prints them.
SUBFLOW_SESSION_ROOT=$tmp/sessions "$starter" dev --port 0 --ui-port 0 >"$tmp/dev.out" 2>"$tmp/dev.err" &
dev_pid=$!
for _ in $(seq 1 120); do
  grep -q '^Serving until interrupted' "$tmp/dev.out" 2>/dev/null && break
  kill -0 "$dev_pid" 2>/dev/null || { cat "$tmp/dev.out" "$tmp/dev.err"; fail "starter dev exited"; }
  sleep 0.5
done
grep -q '^Serving until interrupted' "$tmp/dev.out" || fail "starter dev did not come up"
export TEMPORAL_ADDRESS=$(sed -n 's/^Temporal server *\([^ ]*\).*/\1/p' "$tmp/dev.out")
ui=$(sed -n 's/^Web UI *\(http[^ ]*\).*/\1/p' "$tmp/dev.out")
echo "ui: server $TEMPORAL_ADDRESS, Web UI $ui"

mkdir -p "$tmp/work"
cp "$root/starter/internal/cli/demo/NOTES.md" "$tmp/work/" 2>/dev/null || echo "release checklist" >"$tmp/work/NOTES.md"
run() { # run NAME [starter run flags] TASK: prints the run's JSON line, keeps it in $tmp/NAME.json
  local name=$1; shift
  "$starter" run --cwd "$tmp/work" --model-provider scripted --json "$@" >"$tmp/$name.json" || true
  cat "$tmp/$name.json"
}
field() { sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" "$tmp/$1.json"; }

run completed --model "$here/completed.json" --label "ui: completed" "Summarize the workspace."
run structured --model "$here/structured.json" --schema "$here/schema.json" --label "ui: structured" "Report the checklist as data."
run sdk --provider sdk --model "$here/sdk.json" --label "ui: sdk child" "Answer from a child process."
"$starter" run --cwd "$tmp/work" --model-provider scripted --model "$here/cancel.json" --label "ui: cancelled" \
  --detach --json "Write a long essay." >"$tmp/cancelled.json"
cat "$tmp/cancelled.json"
# A parent that delegates twice in one response; its children answer with completed.json.
sed "s|@CHILD@|$here/completed.json|g" "$here/nested.json" >"$tmp/nested-script.json"
run nested --model "$tmp/nested-script.json" --label "ui: delegating parent" "Split the review in two."
# A run whose digest shows a failed tool call and a nested run.
sed "s|@CHILD@|$here/completed.json|g" "$here/digest.json" >"$tmp/digest-script.json"
run digest --model "$tmp/digest-script.json" --label "ui: digest" "Read the notes and the changes, and delegate a summary."
for name in completed structured sdk nested digest; do
  [ "$(field $name stopReason)" = completed ] || fail "$name run did not complete: $(cat "$tmp/$name.json")"
done
cancel_id=$(field cancelled workflowId)
[ -n "$cancel_id" ] || fail "the cancelled run did not start"

page() { # page NAME URL PNG [TEXT...]: loads URL until every TEXT shows, keeps the DOM in
  # $tmp/NAME.html and, when PNG is not empty, a screenshot in docs/img/PNG.png
  local name=$1 url=$2 png=$3; shift 3
  local flags=(--url "$url" --html "$tmp/$name.html" --timeout 90)
  if [ -n "$png" ]; then mkdir -p "$img"; flags+=(--png "$img/$png.png"); fi
  for text in "$@"; do flags+=(--wait "$text"); done
  node "$here/cdp.js" "${flags[@]}" || fail "$name page ($url): see above; DOM in $tmp/$name.html"
}
refute() { # refute NAME TEXT...: no TEXT is in the page's DOM
  local name=$1; shift
  for text in "$@"; do
    if grep -qF -- "$text" "$tmp/$name.html"; then fail "$name page shows \"$text\""; fi
  done
}
ns=$ui/namespaces/default

# The running delegation (it streams 20 B every 3 s for 5 minutes), with its heartbeat line on
# the pending Drive activity; the "tail" field shows up once some text has streamed.
cancel_run=$(field cancelled runId)
page pending "$ns/workflows/$cancel_id/$cancel_run/pending-activities" ui-pending-activity \
  "Drive" "Heartbeat Details" "running: step 1, " '"tail": "A long essay'

"$starter" cancel "$cancel_id"
code=0; "$starter" result "$cancel_id" >/dev/null || code=$?
[ "$code" = 3 ] || fail "the cancelled run's result exited $code, want 3 (aborted)"

list() { printf '%s/workflows?query=%s' "$ns" "$(printf 'SubagentStopReason="%s"' "$1" | sed 's/ /%20/g; s/"/%22/g; s/=/%3D/g')"; }
page completed-list "$(list completed)" ui-workflows-completed \
  "$(field completed workflowId)" "$(field structured workflowId)" "$(field sdk workflowId)"
refute completed-list "$cancel_id"
page aborted-list "$(list aborted)" "" "$cancel_id"
refute aborted-list "$(field completed workflowId)" "$(field sdk workflowId)"

wid=$(field completed workflowId); rid=$(field completed runId); child=$(field completed childId)
# CreateRootSession, Publish and ReadResult are local activities (markers in history): the
# timeline shows each as its own row named by its activity type, without the summary the
# marker carries (Web UI 2.55); the Drive activity's row shows its summary.
page run "$ns/workflows/$wid/$rid/timeline" ui-run "CreateRootSession" "Publish" "drive spawn child" "ReadResult"
page metadata "$ns/workflows/$wid/$rid/user-metadata" ui-summary \
  "spawn child of a new root session: ui: completed" "Summarize the workspace."
# SubagentLabel holds the label with its colon as a space (workflows.LabelAttribute: SQL
# visibility refuses some characters in Text values).
page attributes "$ns/workflows/$wid/$rid/search-attributes" ui-search-attributes \
  "SubagentStopReason" "completed" "SubagentProvider" "spawn" "SubagentChild" "$child" "SubagentLabel" "ui  completed"

# The delegating parent's Relationships page lists its two nested runs (child workflows),
# whose ids `starter status --tree --json` reports.
nid=$(field nested workflowId); nrid=$(field nested runId)
"$starter" status --tree --json "$nid" >"$tmp/tree.json"
kids=$(grep -o '"workflowId":"subagent-[^"]*"' "$tmp/tree.json" | sed 's/.*:"\(.*\)"/\1/' | grep -v "^$nid\$")
[ "$(echo "$kids" | wc -l)" = 2 ] || fail "the tree of $nid does not list two children: $(cat "$tmp/tree.json")"
# shellcheck disable=SC2086
page relationships "$ns/workflows/$nid/$nrid/relationships" ui-relationships "Relationships" $kids

# The digest as the run's Current Details: the failed read of CHANGES.md with its error's
# first line, and the nested run's link, whose {namespace} the UI fills in.
did=$(field digest workflowId); drid=$(field digest runId)
"$starter" status --json "$did" >"$tmp/digest-status.json"
nested_id=$(grep -o '"workflowId":"subagent-[^"]*"' "$tmp/digest-status.json" | head -1 | sed 's/.*:"\(.*\)"/\1/')
[ -n "$nested_id" ] || fail "the digest of $did names no nested run: $(cat "$tmp/digest-status.json")"
page digest "$ns/workflows/$did/$drid/user-metadata" ui-run-digest \
  "completed · 2 steps · 3 tool calls (1 failed)" "read_file" "NOTES.md" "CHANGES.md" "error: Error: read_file" \
  "subagent" "ui: digest nested" "The notes are a release checklist"
grep -qF "/namespaces/default/workflows/$nested_id" "$tmp/digest.html" ||
  fail "the digest page does not link the nested run $nested_id"

# A batch mid-way: a quick task, a failing one, and slow ones at concurrency 1, so it stands
# with tasks done, one running and the rest pending when its page is read.
{
  printf '{"task": "Summarize the workspace.", "label": "ui: batch quick", "cwd": "%s", "modelProvider": "scripted", "model": "%s"}\n' "$tmp/work" "$here/completed.json"
  printf '{"task": "Fail.", "label": "ui: batch failing", "cwd": "%s", "modelProvider": "scripted", "model": "%s"}\n' "$tmp/work" "$here/failing.json"
  for i in 1 2 3; do
    printf '{"task": "Write a long essay.", "label": "ui: batch slow %s", "cwd": "%s", "modelProvider": "scripted", "model": "%s"}\n' "$i" "$tmp/work" "$here/cancel.json"
  done
} >"$tmp/batch.jsonl"
"$starter" batch --id ui-batch --concurrency 1 --detach "$tmp/batch.jsonl" >/dev/null
# The batch's current run, from its page's links (the batch workflow continues as new).
page batch-run "$ns/workflows/ui-batch" "" "ui-batch" "User Metadata"
brid=$(grep -o 'workflows/ui-batch/[0-9a-f-]*/' "$tmp/batch-run.html" | head -1 | cut -d/ -f3)
[ -n "$brid" ] || fail "the batch's page links no run"
page batch "$ns/workflows/ui-batch/$brid/user-metadata" ui-batch-page \
  "batch ui-batch" "· running · 2 of 5 tasks done" "pending" "Last failed tasks" "ui: batch failing" "runs/s"
"$starter" batch status --json ui-batch >"$tmp/batch-status.json"
grep -q '"running": *1,' "$tmp/batch-status.json" || fail "the batch is not mid-way: $(cat "$tmp/batch-status.json")"
"$starter" batch cancel ui-batch >/dev/null

echo "ui: 7 runs and a batch, 10 pages checked; screenshots in docs/img/"
