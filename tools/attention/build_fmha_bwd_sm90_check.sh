#!/usr/bin/env bash
# Builds build_check/fmha_bwd_sm90_check (tools/attention/fmha_bwd_sm90_check.cu): the Hopper
# attention backward, the FA2 backward (reference, preprocess, dQ conversion) and the FA2 forward
# (out / lse), with the main build's nvcc flags. One TU at a time; objects are reused when newer
# than their source and headers are unchanged (delete build_check/ to force).
# Usage: tools/attention/build_fmha_bwd_sm90_check.sh   (from anywhere; NVCC and CUTLASS_ROOT override)
set -euo pipefail
TREE="$(cd "$(dirname "$0")/../.." && pwd)"
NVCC="${NVCC:-/usr/local/cuda/bin/nvcc}"
CUTLASS_ROOT="${CUTLASS_ROOT:-/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/cutlass_library/source}"
OUT="$TREE/build_check"
FLAGS=(-DMSLK_HAS_CUTLASS=1 -I"$TREE/csrc" -I"$TREE/include" -isystem="$CUTLASS_ROOT/include"
       -isystem="$CUTLASS_ROOT/tools/util/include" -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a
       --expt-relaxed-constexpr -lineinfo -std=c++17)
K=csrc/attention/kernels
SRCS=(tools/attention/fmha_bwd_sm90_check.cu tools/attention/fmha_bwd_sm90_variants.cu
      $K/fmha_bwd_sm90.cu $K/fmha_bwd_sm90_d64.cu $K/fmha_bwd_sm90_d128.cu $K/fmha_bwd_sm90_d256.cu
      $K/fmha_bwd.cu $K/fmha_bwd_d64.cu $K/fmha_bwd_d128.cu $K/fmha_bwd_d256.cu
      $K/fmha_fwd_d64.cu $K/fmha_fwd_d128.cu $K/fmha_fwd_d256.cu)
mkdir -p "$OUT"
newest_header=$(find "$TREE/csrc" -name '*.h' -o -name '*.cuh' | xargs stat -c %Y | sort -n | tail -1)
OBJS=()
for s in "${SRCS[@]}"; do
  o="$OUT/$(basename "${s%.cu}").o"
  OBJS+=("$o")
  if [[ -f "$o" && "$o" -nt "$TREE/$s" && $(stat -c %Y "$o") -ge $newest_header ]]; then continue; fi
  echo "nvcc $s"
  "$NVCC" "${FLAGS[@]}" -c "$TREE/$s" -o "$o"
done
"$NVCC" -gencode=arch=compute_90a,code=sm_90a "${OBJS[@]}" -o "$OUT/fmha_bwd_sm90_check"
echo "built $OUT/fmha_bwd_sm90_check"
