#!/usr/bin/env bash
# One full round on a GPU machine (no network needed): build with every core, C++ tests, the
# whole pytest suite with GPU tests required, the benchmarks, the demo; a short summary last.
# Logs and benchmark tables go to $OUT/round.tgz (OUT default ./out), re-packed after every step so
# a call cut short by the device's time limit still returns what was done. Args: optional pytest
# selection (default: each test/<domain> folder in its own pytest process, so a hang or crash in
# one domain costs only that domain). Env: BENCHES (see below), BENCH_ARGS_<script stem> (extra
# arguments of that benchmark script), SKIP_TESTS=1 (build + benchmarks
# only), TUNE=1 (also the FP8 rowwise and sm90 attention tile sweeps; TUNE=attention / TUNE=fp8: one), MICROBENCH=1 (tools/microbench ceilings; MICROBENCH=tiles: the quantizer stream's tile sweep only), PROFILE=1 (ncu on attention and FP8 GEMM vs peers), PREBUILT=1 (use the carried mslk/lib and build/test/cpp of tools/prebuild.sh), TEST_TIMEOUT (seconds per pytest process, default 300), MSLK_TEST_TIMEOUT (seconds per
# test, default 120: a hung test dumps its traceback and ends its process; see test/conftest.py).
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL=${OUT:-$PWD/out}
OUT=$FINAL/round   # everything lands here, then travels back as one archive (the device tool
mkdir -p "$OUT"    # returns at most 8 files)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
[ -d .deps/cutlass/include ] && export MSLK_CUTLASS_DIR="$PWD/.deps/cutlass"
status=()
pack() { tar czf "$FINAL/round.tgz" -C "$FINAL" round 2>/dev/null; }
export MSLK_TEST_TIMEOUT=${MSLK_TEST_TIMEOUT:-120}
# GPU tests must run here: a skip for want of a GPU fails (test/conftest.py)
export MSLK_REQUIRE_GPU=1

t0=$(date +%s)
if [ "${PREBUILT:-0}" = 1 ] && [ -f .prebuilt/libmslk.so.xz ]; then
  # tools/prebuild.sh's compressed carry: the library and the C++ test binaries
  mkdir -p mslk/lib build/test/cpp
  xz -dc .prebuilt/libmslk.so.xz >mslk/lib/libmslk.so && cp .prebuilt/build_info.json mslk/lib/
  [ -f .prebuilt/cpp_tests.tar.xz ] && tar xJf .prebuilt/cpp_tests.tar.xz -C build/test/cpp
fi
if [ "${PREBUILT:-0}" = 1 ] && [ -f mslk/lib/libmslk.so ]; then
  # Built on the dev machine by tools/prebuild.sh (same nvcc and torch) and carried: no device
  # minutes spent compiling.
  b=ok
  status+=("build: prebuilt, carried ($(cat mslk/lib/build_info.json 2>/dev/null))")
else
  MSLK_CUDA=ON bash tools/build.sh >"$OUT/build.log" 2>&1 && b=ok || b=FAILED
  status+=("build: $b in $(( $(date +%s) - t0 )) s ($(nproc) cores)")
fi
pack
[ "$b" = ok ] || { tail -40 "$OUT/build.log"; printf '%s\n' "${status[@]}"; exit 1; }

if [ "${PREBUILT:-0}" = 1 ] && [ -d build/test/cpp ]; then
  # carried C++ tests: run the binaries directly (ctest files hold the dev machine's paths)
  tlib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  pass=0; fail=0
  for t in build/test/cpp/mslk_test_*; do
    [ -x "$t" ] || continue
    if LD_LIBRARY_PATH="$PWD/mslk/lib:$tlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 300 "$t" >>"$OUT/ctest.log" 2>&1
    then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t" >>"$OUT/ctest.log"; fi
  done
  status+=("C++ tests: $pass passed, $fail failed")
elif [ -d build/test/cpp ]; then
  ctest --test-dir build --output-on-failure >"$OUT/ctest.log" 2>&1
  status+=("ctest: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)")
fi
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  # One pytest process per test file (a crash or a poisoned CUDA context costs one file), PAR of
  # them at once (default 6: correctness tests share the GPU well; the benchmarks below run alone).
  # Largest files first, so the long ones do not start last; packed every 20 s meanwhile, so a
  # call cut at its limit still returns the logs.
  if [ $# -gt 0 ]; then groups=("$@"); else mapfile -t groups < <(ls -S test/*/test_*.py); fi
  # Inductor's first CPU compile in a process builds and caches its vector-ISA probe; eight
  # processes doing it at once under load hung past the per-test limit (2026-11-30): warm it once.
  timeout 120 python3 -c "import torch; torch.compile(lambda x: x.sin() + 1)(torch.randn(64))" \
    >"$OUT/inductor_warmup.log" 2>&1 || status+=("inductor CPU warm-up: FAILED (see inductor_warmup.log)")
  ( while sleep 20; do pack; done ) & packer=$!
  printf '%s\n' "${groups[@]}" | OUT="$OUT" PAR="${PAR:-6}" xargs -P "${PAR:-6}" -I{} bash tools/gpu_test_file.sh {}
  kill $packer 2>/dev/null
  for g in "${groups[@]}"; do
    name=$(echo "$g" | tr -c 'A-Za-z0-9_.-' '_' | sed 's/_*$//')
    status+=("pytest $g: $(cat "$OUT/status_$name" 2>/dev/null)")
  done
  grep -hE "^(FAILED|ERROR)|TIMEOUT" "$OUT"/pytest_*.log | head -40
  pack
fi

# BENCHES: which bench/<domain> folders to run ("all" default, "none", or e.g. "quantize gemm"):
# a full round can outlast one 10-minute device call, so split it when needed.
sel=${BENCHES:-all}
[ "$sel" = all ] && sel=$(ls bench/*/bench_*.py | xargs -n1 dirname | xargs -n1 basename | sort -u | tr '\n' ' ')
[ "$sel" = none ] && sel=
# DEADLINE_S: seconds since the start after which no benchmark starts, and past which a running
# one is cut (so one device call never outlasts its limit and always returns the summary).
deadline=${DEADLINE_S:-100000}
left() { echo $(( deadline - ($(date +%s) - t0) )); }
for item in $sel; do   # a domain ("gemm") or one script's stem ("bench_fp8_rowwise"), in this order
  for b in bench/$item/bench_*.py bench/*/$item.py; do
    [ -f "$b" ] || continue
    n=$(basename "$b" .py)
    if [ "$(left)" -lt 20 ]; then status+=("$n: skipped (deadline)"); continue; fi
    args_var="BENCH_ARGS_$n"   # e.g. BENCH_ARGS_bench_fp8_blockwise="--grouped-only": that script's extra arguments
    # shellcheck disable=SC2086
    timeout "$(left)" python3 -m "bench.$(basename "$(dirname "$b")").$n" --out "$OUT/${n#bench_}.md" ${!args_var:-} \
      >"$OUT/$n.log" 2>&1
    rc=$?
    [ $rc = 0 ] && status+=("$n: ok") || { status+=("$n: FAILED rc $rc"); tail -20 "$OUT/$n.log"; }
    pack
  done
done
# TUNE=1: the FP8 rowwise tuning sweep too (every CUTLASS row, the decode kernel, _scaled_mm over
# the issue grid); back on the dev machine: python3 tools/gemm/regen_fp8_buckets.py <json>.
# (TUNE=attention or TUNE=fp8 runs just one of the two sweeps.)
tune() { [ "${TUNE:-0}" = 1 ] || [[ " ${TUNE:-} " == *" $1 "* ]]; }
if tune fp8 && [ "$(left)" -gt 20 ]; then
  timeout "$(left)" python3 -m bench.gemm.tune_fp8_rowwise --json "$OUT/tune_fp8_rowwise_points.json" --out "$OUT/tune_fp8_rowwise.md" \
    >"$OUT/tune_fp8_rowwise.log" 2>&1 && status+=("tune_fp8_rowwise: ok") || status+=("tune_fp8_rowwise: FAILED")
  pack
fi
# ... and the Hopper attention kernel's candidate tile rows (a failing candidate loses only this table)
if tune attention && [ "$(left)" -gt 20 ]; then
  timeout "$(left)" python3 -m bench.attention.tune_fmha_sm90 --out "$OUT/tune_fmha_sm90.md" \
    >"$OUT/tune_fmha_sm90.log" 2>&1 && status+=("tune_fmha_sm90: ok") || status+=("tune_fmha_sm90: FAILED")
  pack
fi
# MICROBENCH=1: the no-math ceilings (tools/microbench: DRAM stream patterns, eager host overhead).
# MICROBENCH=tiles: only the quantizer stream's tile-shape sweep (stream_patterns tiles).
if [ "${MICROBENCH:-0}" != 0 ] && [ "$(left)" -gt 60 ]; then
  sp_args=(); [ "${MICROBENCH}" = tiles ] && sp_args=(tiles)
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tools/microbench/stream_patterns.cu -o "$OUT/stream_patterns" \
    >"$OUT/stream_patterns.txt" 2>&1 && timeout "$(left)" "$OUT/stream_patterns" ${sp_args[@]+"${sp_args[@]}"} >>"$OUT/stream_patterns.txt" 2>&1 \
    && status+=("stream_patterns: ok") || status+=("stream_patterns: FAILED")
  rm -f "$OUT/stream_patterns"
  if [ "${MICROBENCH}" = 1 ]; then
    timeout "$(left)" python3 tools/microbench/host_overhead.py >"$OUT/host_overhead.txt" 2>&1 \
      && status+=("host_overhead: ok") || status+=("host_overhead: FAILED")
  fi
  pack
fi
# PROFILE=1: Nsight Compute on our kernels and their peers (tools/profile/ncu_round.sh), after the
# benchmarks so it does not disturb their timing.
if [ "${PROFILE:-0}" = 1 ] && [ "$(left)" -gt 60 ]; then
  # PROFILE_TARGETS: keys of tools/profile/ncu_targets.py (default: ncu_round.sh's four)
  timeout "$(left)" bash tools/profile/ncu_round.sh "$OUT" ${PROFILE_TARGETS:-} && status+=("ncu: ok") || status+=("ncu: FAILED")
  pack
fi
timeout 120 python3 tools/demo.py >"$OUT/demo.log" 2>&1 && status+=("demo: ok") || status+=("demo: FAILED")

echo "================ summary ================"
for f in "$OUT"/*.md; do [ -f "$f" ] && { echo "--- $(basename "$f")"; grep '^|' "$f"; }; done
tail -3 "$OUT/demo.log"
printf '%s\n' "${status[@]}"
pack && rm -rf "$OUT"
