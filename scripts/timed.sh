#!/usr/bin/env bash
# Runs one phase of a make target and says how long it took, so that the time of a
# fresh `make test` or `make run` can be read phase by phase (scripts/fresh-clone-check.sh
# collects these lines).  The command's output and exit status pass through.
# Usage: scripts/timed.sh PHASE COMMAND [ARG...]
set -u
phase=${1:?usage: timed.sh PHASE COMMAND [ARG...]}
shift
start=$(date +%s.%N)
"$@"
rc=$?
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if [[ $rc -eq 0 ]]; then
  echo "phase $phase: $secs s"
else
  echo "phase $phase: FAILED (exit $rc) after $secs s"
fi
exit $rc
