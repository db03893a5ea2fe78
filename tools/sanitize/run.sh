#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck and initcheck over tools/sanitize/cases.py (one small
# call per landed CUDA op, plus odd-shape edge cases), the three tools in parallel on one GPU.
# Logs go to $OUT/sanitize (OUT default ./out); the last lines give each tool's error count and
# the kernels named in its reports. Exit status 0 only when every tool reports zero errors and
# every case ran. Args are passed to cases.py (name substrings selecting cases).
set -uo pipefail
cd "$(dirname "$0")/../.."
LOG=${OUT:-$PWD/out}/sanitize
mkdir -p "$LOG"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# Without the caching allocator every tensor is its own allocation, so an out-of-bounds access
# lands outside it instead of inside a neighbour's block of the same pool.
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
declare -A extra=(
  [memcheck]="--leak-check no"
  [racecheck]="--racecheck-report hazard"
  # unused allocations are not errors; torch allocates outputs it then fully writes
  [initcheck]="--track-unused-memory no"
)
pids=()
for tool in memcheck racecheck initcheck; do
  # shellcheck disable=SC2086
  "$CS" --tool "$tool" ${extra[$tool]} --print-limit 200 --error-exitcode 9 \
    python3 tools/sanitize/cases.py "$@" >"$LOG/$tool.log" 2>&1 &
  pids+=($!)
done
rc=0
i=0
for tool in memcheck racecheck initcheck; do
  wait "${pids[$i]}"; code=$?; i=$((i + 1))
  summary=$(grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$LOG/$tool.log" | tail -1)
  cases=$(grep -h "^cases:" "$LOG/$tool.log" | tail -1)
  echo "$tool: exit $code; ${summary:-no summary}; ${cases:-cases did not finish}"
  grep -ho "in [A-Za-z_][A-Za-z0-9_:<>, ]*" "$LOG/$tool.log" | grep -v "^in /" | sort | uniq -c | sort -rn | head -8 \
    | sed 's/^/    /'
  [ "$code" = 0 ] || rc=1
done
exit $rc
