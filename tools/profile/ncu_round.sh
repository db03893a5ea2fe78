#!/usr/bin/env bash
# Nsight Compute on the profiled call of each target of ncu_targets.py (clocks left alone, as
# the device notes ask): speed of light, occupancy, warp stalls, launch stats and the tensor pipe.
# Output: $1/ncu_<target>.txt (default ./out). Targets: args, default all. NCU_METRICS: more
# metrics, comma-separated (regex: entries allowed), e.g. the per-pipe and per-stall-reason ones.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-out}; shift || true
mkdir -p "$out"
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(attn-mslk attn-cudnn fp8-mslk fp8-cublas)
for t in "${targets[@]}"; do
  timeout 120 ncu --clock-control none --nvtx --nvtx-include "prof/" \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    --section MemoryWorkloadAnalysis \
    --metrics "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed${NCU_METRICS:+,$NCU_METRICS}" \
    python3 tools/profile/ncu_targets.py "$t" >"$out/ncu_$t.txt" 2>&1 || echo "ncu $t failed (rc $?)" >>"$out/ncu_$t.txt"
done
