#!/usr/bin/env bash
# One test file in its own pytest process, for tools/gpu_round.sh (which runs several at once):
# log in $OUT/pytest_<name>.log, hung-test traceback in $OUT/watchdog_<name>.log, one status line
# in $OUT/status_<name>.
g=$1
name=$(echo "$g" | tr -c 'A-Za-z0-9_.-' '_' | sed 's/_*$//')
# PAR processes share the cores: torch's default of one CPU thread per core in each of them
# oversubscribed the machine 8-fold and tripled the CPU reference tests' time (2026-11-30).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / ${PAR:-6} > 1 ? $(nproc) / ${PAR:-6} : 1 ))}
MSLK_WATCHDOG_FILE="$OUT/watchdog_$name.log" MSLK_REQUIRE_GPU=1 timeout "${TEST_TIMEOUT:-300}" \
  python3 -m pytest -q -p no:cacheprovider "$g" >"$OUT/pytest_$name.log" 2>&1
rc=$?
[ $rc = 124 ] && echo "TIMEOUT after ${TEST_TIMEOUT:-300} s" >>"$OUT/pytest_$name.log"
echo "$(tail -1 "$OUT/pytest_$name.log") (rc $rc)" >"$OUT/status_$name"
