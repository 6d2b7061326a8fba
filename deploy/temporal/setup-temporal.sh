#!/bin/sh
# Creates the namespace and subflow's custom search attributes (contract R-75; the same set
# devserver.SearchAttributes registers in the embedded server). Safe to run again: only what
# is missing is created.
set -eu
: "${TEMPORAL_ADDRESS:=temporal:7233}" "${TEMPORAL_NAMESPACE:=default}"
export TEMPORAL_ADDRESS

echo "waiting for Temporal at $TEMPORAL_ADDRESS"
until temporal operator cluster health >/dev/null 2>&1; do sleep 2; done

if ! temporal operator namespace describe --namespace "$TEMPORAL_NAMESPACE" >/dev/null 2>&1; then
  temporal operator namespace create --namespace "$TEMPORAL_NAMESPACE" --retention 72h
fi

existing=$(temporal operator search-attribute list --namespace "$TEMPORAL_NAMESPACE")
created=0
for attr in SubagentBatch:Keyword SubagentChild:Keyword SubagentDepth:Int SubagentLabel:Text \
  SubagentModel:Keyword SubagentParent:Keyword SubagentProvider:Keyword SubagentStopReason:Keyword \
  SubagentRetryOf:Keyword SubagentInputTokens:Int SubagentOutputTokens:Int; do
  name=${attr%%:*}
  if ! printf '%s\n' "$existing" | grep -qw "$name"; then
    temporal operator search-attribute create --namespace "$TEMPORAL_NAMESPACE" --name "$name" --type "${attr#*:}"
    created=1
  fi
done
if [ "$created" = 1 ]; then
  # Each Temporal service caches the search attributes for 60 s: a run started sooner could
  # be refused for one it does not know yet.
  echo "waiting 61s for the services' search-attribute caches to take the new attributes"
  sleep 61
fi
echo "namespace $TEMPORAL_NAMESPACE has the subflow search attributes"
