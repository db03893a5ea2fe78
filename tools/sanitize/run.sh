#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck and initcheck over tools/sanitize/cases.py (one small
# call per landed CUDA op, plus odd-shape edge cases), the tools in parallel on one GPU.
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
# initcheck does not count TMA bulk-tensor stores (cp.async.bulk.tensor) as initialising global
# memory: every read of an output the Hopper attention forward wrote that way is reported (cases.py's
# "probe" cases show it: the same read of the sm80 kernel's output is clean). So the main initcheck
# run takes the attention forward on the sm80 kernel (ordinary stores; every other kernel, the
# Hopper backward's included, runs as usual), and "initcheck_sm90_forward" checks the Hopper
# forward alone, with nothing reading its output.
declare -A extra=(
  [memcheck]="--leak-check no"
  [racecheck]="--racecheck-report hazard"
  [initcheck]=""
  [initcheck_sm90_forward]=""
)
TOOLS=(memcheck racecheck initcheck initcheck_sm90_forward)
pids=()
for tool in "${TOOLS[@]}"; do
  args=("$@") fk=auto
  [ "$tool" = initcheck ] && fk=sm80
  [ "$tool" = initcheck_sm90_forward ] && args=(forward:) fk=sm90
  # shellcheck disable=SC2086
  MSLK_FMHA_KERNEL=$fk "$CS" --tool "${tool%%_*}" ${extra[$tool]} --print-limit ${PRINT_LIMIT:-2000} \
    --error-exitcode 9 python3 tools/sanitize/cases.py "${args[@]}" >"$LOG/$tool.log" 2>&1 &
  pids+=($!)
done
rc=0
i=0
for tool in "${TOOLS[@]}"; do
  wait "${pids[$i]}"; code=$?; i=$((i + 1))
  summary=$(grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$LOG/$tool.log" | tail -1)
  cases=$(grep -h "^cases:" "$LOG/$tool.log" | tail -1)
  echo "$tool: exit $code; ${summary:-no summary}; ${cases:-cases did not finish}"
  # where the reports point: device source lines, then the kernels
  grep -ho "in [A-Za-z0-9_./-]*\.cuh\?:[0-9]*" "$LOG/$tool.log" | sort | uniq -c | sort -rn | head -8 | sed 's/^/    /'
  grep -hoE "^=========     (Read|Write|Invalid|Uninitialized).* at [^+]*" "$LOG/$tool.log" | sed 's/.* at //' \
    | sort | uniq -c | sort -rn | head -8 | sed 's/^/    /'
  [ "$code" = 0 ] || rc=1
done
exit $rc
